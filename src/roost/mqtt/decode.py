"""Decoders of every MQTT packet, both roles, all three protocol levels, and the checks
that refuse malformed input with its MQTT 5 reason code. This module frames a packet and
decodes PUBLISH and its acks; CONNECT, CONNACK, PINGREQ/PINGRESP, DISCONNECT and AUTH are
in decode_connection.py, SUBSCRIBE and UNSUBSCRIBE with their acks in
decode_subscriptions.py, the fields they share in decode_fields.py.

Malformed input and its reason code:

====================================================  =====================================
input                                                 reason code
====================================================  =====================================
packet type 0, or 15 (AUTH) below MQTT 5              0x81 Malformed Packet
reserved fixed-header flags not as the spec fixes     0x81 Malformed Packet
PUBLISH with QoS 3                                    0x81 Malformed Packet
remaining length longer than four bytes               0x81 Malformed Packet
packet larger than ``max_packet_size``                0x95 Packet too large
a packet the peer's role never sends (server role     0x82 Protocol Error
gets CONNACK, SUBACK, ...), or no CONNECT first
packet ends early, or bytes left over                 0x81 Malformed Packet
string not well-formed UTF-8, or with U+0000          0x81 Malformed Packet
unknown protocol name or level in CONNECT             0x84 Unsupported Protocol Version
CONNECT reserved flag set; will QoS 3; will QoS or    0x81 Malformed Packet
retain without the will flag; 3.x password without
user name
property not allowed in the packet, unknown id        0x81 Malformed Packet
property twice; flag property not 0/1; a zero         0x82 Protocol Error
Receive Maximum, Maximum Packet Size, Topic Alias
or Subscription Identifier; authentication data
without a method
reason code not defined for the packet                0x82 Protocol Error
packet identifier 0                                   0x82 Protocol Error
PUBLISH topic with a wildcard, or empty (3.x)         0x90 Topic Name invalid
PUBLISH empty topic without a Topic Alias (5.0)       0x82 Protocol Error
QoS 0 PUBLISH with DUP set                            0x82 Protocol Error
client PUBLISH with a Subscription Identifier         0x82 Protocol Error
SUBSCRIBE / UNSUBSCRIBE without a topic filter        0x82 Protocol Error
subscription options: reserved bits set, QoS 3        0x81 Malformed Packet
retain handling 3; no-local on a shared subscription  0x82 Protocol Error
====================================================  =====================================

Topic filters in SUBSCRIBE and UNSUBSCRIBE are not validated here: an MQTT 5 server
refuses a bad filter in its SUBACK (0x8F) and keeps the connection, so the session
checks each with ``topics.validate_topic_filter``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from roost.mqtt.decode_connection import (
    _decode_auth,
    _decode_connack,
    _decode_connect,
    _decode_disconnect,
    _decode_pingreq,
    _decode_pingresp,
)
from roost.mqtt.decode_fields import _done, _packet_id, _reason
from roost.mqtt.decode_subscriptions import (
    _decode_suback,
    _decode_subscribe,
    _decode_unsuback,
    _decode_unsubscribe,
)
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    AUTH,
    CONNACK,
    CONNECT,
    DISCONNECT,
    MQTT_5,
    PACKET_NAMES,
    PINGREQ,
    PINGRESP,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    SUBACK,
    SUBSCRIBE,
    UNSUBACK,
    UNSUBSCRIBE,
    Packet,
    Properties,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
)
from roost.mqtt.properties import decode_properties
from roost.mqtt.reason_codes import MALFORMED_PACKET, PROTOCOL_ERROR, TOPIC_NAME_INVALID
from roost.mqtt.wire import MAX_VARINT, Reader, check_utf8

MAX_PACKET_SIZE: Final = 1 + 4 + MAX_VARINT  # the largest packet the framing can carry

# packets each side sends (DISCONNECT from a server and AUTH exist in MQTT 5 only)
FROM_CLIENT: Final = frozenset(
    {CONNECT, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE, UNSUBSCRIBE, PINGREQ,
     DISCONNECT, AUTH}
)
FROM_SERVER: Final = frozenset(
    {CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK, UNSUBACK, PINGRESP,
     DISCONNECT, AUTH}
)
_FLAGS_0010: Final = frozenset({PUBREL, SUBSCRIBE, UNSUBSCRIBE})


def check_first_byte(first: int, level: int | None, role: str) -> None:
    ptype = first >> 4
    flags = first & 0x0F
    if ptype == 0 or (ptype == AUTH and level is not None and level < MQTT_5):
        raise MQTTError(MALFORMED_PACKET, f"reserved packet type {ptype}")
    name = PACKET_NAMES[ptype]
    if ptype not in (FROM_CLIENT if role == "server" else FROM_SERVER):
        raise MQTTError(PROTOCOL_ERROR, f"a {role} does not accept {name}", ptype)
    if level is None and ptype != CONNECT:
        raise MQTTError(PROTOCOL_ERROR, f"{name} before CONNECT", ptype)
    if ptype == PUBLISH:
        if flags & 0x06 == 0x06:
            raise MQTTError(MALFORMED_PACKET, "PUBLISH with QoS 3", ptype)
    elif flags != (0x02 if ptype in _FLAGS_0010 else 0):
        raise MQTTError(MALFORMED_PACKET, f"reserved flags 0x{flags:X} in {name}", ptype)
    if role == "client" and ptype == DISCONNECT and level is not None and level < MQTT_5:
        raise MQTTError(PROTOCOL_ERROR, "DISCONNECT from a 3.x server", ptype)


def _decode_publish(r: Reader, flags: int, level: int, role: str) -> Publish:
    # the hot path: read straight from the buffer instead of through Reader's methods
    qos = (flags >> 1) & 0x03
    dup = bool(flags & 0x08)
    if dup and not qos:
        raise MQTTError(PROTOCOL_ERROR, "DUP set on a QoS 0 PUBLISH", PUBLISH)
    data, pos, end = r.data, r.pos, r.end
    if end - pos < 2:
        raise MQTTError(MALFORMED_PACKET, "packet ends before the topic name", PUBLISH)
    size = data[pos] << 8 | data[pos + 1]
    pos += 2
    if pos + size > end:
        raise MQTTError(MALFORMED_PACKET, "packet ends inside the topic name", PUBLISH)
    topic = check_utf8(data[pos : pos + size], "topic name")  # U+0000 refused there
    pos += size
    packet_id = None
    if qos:
        if pos + 2 > end:
            raise MQTTError(MALFORMED_PACKET, "packet ends inside the packet identifier", PUBLISH)
        packet_id = data[pos] << 8 | data[pos + 1]
        pos += 2
        if not packet_id:
            raise MQTTError(PROTOCOL_ERROR, "packet identifier 0", PUBLISH)
    if level == MQTT_5:
        r.pos = pos
        props = decode_properties(r, PUBLISH)
        pos = r.pos
    else:
        props = Properties()
    if "+" in topic or "#" in topic:
        raise MQTTError(TOPIC_NAME_INVALID, f"wildcard in topic name {topic!r}", PUBLISH)
    if not topic:
        if level < MQTT_5:
            raise MQTTError(TOPIC_NAME_INVALID, "empty topic name", PUBLISH)
        if props.topic_alias is None:
            raise MQTTError(PROTOCOL_ERROR, "empty topic name without a topic alias", PUBLISH)
    if role == "server" and props.subscription_identifiers:
        raise MQTTError(PROTOCOL_ERROR, "subscription identifier from a client", PUBLISH)
    return Publish(topic, bytes(data[pos:end]), qos, bool(flags & 0x01), dup, packet_id, props)


_ACK_CLASSES: Final[dict[int, Any]] = {
    PUBACK: PubAck, PUBREC: PubRec, PUBREL: PubRel, PUBCOMP: PubComp
}


def _decoder_ack(ptype: int) -> Callable[[Reader, int, int, str], Packet]:
    cls = _ACK_CLASSES[ptype]

    def decode(r: Reader, flags: int, level: int, role: str) -> Packet:
        packet_id = _packet_id(r, ptype)
        code = 0
        props = Properties()
        if level == MQTT_5 and r.remaining():
            code = _reason(r, ptype)
            if r.remaining():
                props = decode_properties(r, ptype)
        _done(r, ptype)
        ack: Packet = cls(packet_id, code, props)
        return ack

    return decode


_DECODERS: Final[dict[int, Callable[[Reader, int, Any, str], Packet]]] = {
    CONNECT: _decode_connect,
    CONNACK: _decode_connack,
    PUBLISH: _decode_publish,
    PUBACK: _decoder_ack(PUBACK),
    PUBREC: _decoder_ack(PUBREC),
    PUBREL: _decoder_ack(PUBREL),
    PUBCOMP: _decoder_ack(PUBCOMP),
    SUBSCRIBE: _decode_subscribe,
    SUBACK: _decode_suback,
    UNSUBSCRIBE: _decode_unsubscribe,
    UNSUBACK: _decode_unsuback,
    PINGREQ: _decode_pingreq,
    PINGRESP: _decode_pingresp,
    DISCONNECT: _decode_disconnect,
    AUTH: _decode_auth,
}


def decode_packet(
    first_byte: int, body: bytes | memoryview, protocol_level: int | None, role: str = "server"
) -> Packet:
    """One packet from its fixed header's first byte and its body (the bytes after the
    remaining length)."""
    check_first_byte(first_byte, protocol_level, role)
    return decode_body(first_byte, body, protocol_level, role)


def decode_body(
    first_byte: int, body: bytes | memoryview, protocol_level: int | None, role: str
) -> Packet:
    """``decode_packet`` once ``check_first_byte`` has passed (the reader checks it from
    the first byte, before the body is there)."""
    return _DECODERS[first_byte >> 4](Reader(body), first_byte & 0x0F, protocol_level, role)
