"""MQTT <-> the core's message model, as RabbitMQ's MQTT plugin maps them.

Topics travel through ``amq.topic``: a topic's ``/`` level separator becomes the routing
key's ``.`` (and a ``.`` inside a level becomes ``/``, so it survives the way back), a
filter's ``+`` becomes ``*`` and ``#`` stays ``#``. The way back leaves ``*`` alone: a
routing key is a name, and a ``+`` in a PUBLISH's topic is a protocol error that clients
refuse (RabbitMQ 3.x turns ``*`` into ``+``: a topic ``a/*`` reaches subscribers as
``a/+``). A QoS 1 publish is persistent (delivery mode 2, as RabbitMQ sets it) and carries
its QoS in ``x-mqtt-publish-qos``.
MQTT 5 properties map onto AMQP's where one exists (content type, correlation data,
response topic, message expiry, user properties as headers), the other way likewise.
"""

from __future__ import annotations

from typing import Any, Final

from roost.core import Message, Properties
from roost.mqtt.packets import Properties as MQTTProperties

EXCHANGE: Final = "amq.topic"
QOS_HEADER: Final = "x-mqtt-publish-qos"
DUP_HEADER: Final = "x-mqtt-dup"
RETAIN_HEADER: Final = "x-mqtt-retain"
# the publishing client id, set only while that connection has a no-local subscription
PUBLISHER_HEADER: Final = "x-mqtt-publisher"

_TO_KEY: Final = str.maketrans({"/": ".", ".": "/", "+": "*"})
_TO_TOPIC: Final = str.maketrans({".": "/", "/": "."})
# AMQP headers an MQTT 5 subscriber does not get as user properties
_OWN_HEADERS: Final = frozenset({QOS_HEADER, DUP_HEADER, RETAIN_HEADER, PUBLISHER_HEADER})


def routing_key(topic: str) -> str:
    """``a/b/+/#`` -> ``a.b.*.#``: a topic name or filter as amq.topic's key."""
    return topic.translate(_TO_KEY)


def topic(key: str) -> str:
    """``a.b.c`` -> ``a/b/c``: the MQTT topic name of a routing key (``*`` stays)."""
    return key.translate(_TO_TOPIC)


def message_from_publish(
    topic_name: str, payload: bytes, qos: int, props: MQTTProperties | None, *,
    dup: bool = False, retain: bool = False, marks: dict[str, Any] | None = None,
) -> Message:
    """``marks``: headers of Roost's own (``x-mqtt-…``) that MQTT 5 subscribers do not
    see as user properties."""
    headers: dict[str, Any] = {QOS_HEADER: qos}
    if dup:
        headers[DUP_HEADER] = True
    if retain:  # kept for a subscription's retain-as-published
        headers[RETAIN_HEADER] = True
    if marks:
        headers.update(marks)
    content_type = correlation_id = reply_to = expiration = None
    if props is not None:
        for name, value in props.user_properties:
            headers.setdefault(name, value)
        content_type = props.content_type
        if props.correlation_data is not None:
            correlation_id = props.correlation_data.decode("utf-8", "replace")
        if props.response_topic is not None:
            reply_to = routing_key(props.response_topic)
        if props.message_expiry_interval is not None:
            expiration = str(props.message_expiry_interval * 1000)
    properties = Properties(
        content_type=content_type,
        headers=headers,
        delivery_mode=2 if qos else 1,
        correlation_id=correlation_id,
        reply_to=reply_to,
        expiration=expiration,
    )
    return Message(EXCHANGE, routing_key(topic_name), properties, payload)


def published_retain(message: Message) -> bool:
    headers = message.properties.headers
    return bool(headers and headers.get(RETAIN_HEADER))


def publisher(message: Message) -> str:
    headers = message.properties.headers
    return _text(headers.get(PUBLISHER_HEADER, "")) if headers else ""


def published_qos(message: Message) -> int:
    """The QoS a message was published with: MQTT's header, else AMQP's persistence."""
    headers = message.properties.headers
    if headers:
        qos = headers.get(QOS_HEADER)
        if isinstance(qos, int):
            return min(qos, 1)
    return 1 if message.properties.delivery_mode == 2 else 0


def properties_for_v5(message: Message) -> MQTTProperties:
    """The MQTT 5 PUBLISH properties of a delivered message."""
    p = message.properties
    out = MQTTProperties()
    if p.content_type is not None:
        out.content_type = p.content_type
    if p.correlation_id is not None:
        out.correlation_data = p.correlation_id.encode()
    if p.reply_to is not None:
        out.response_topic = topic(p.reply_to)
    if p.expiration is not None and p.expiration.isdigit():
        out.message_expiry_interval = (int(p.expiration) + 999) // 1000
    if p.headers:
        out.user_properties = [
            (str(k), _text(v)) for k, v in p.headers.items() if k not in _OWN_HEADERS
        ]
    return out


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
