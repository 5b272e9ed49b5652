"""Decoders of SUBSCRIBE, SUBACK, UNSUBSCRIBE and UNSUBACK, with the subscription
options' checks (topic filters are the session's to check: mqtt/decode.py says why)."""

from __future__ import annotations

from typing import Final

from roost.mqtt.decode_fields import _done, _packet_id
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    MQTT_5,
    SUBACK,
    SUBSCRIBE,
    UNSUBACK,
    UNSUBSCRIBE,
    Properties,
    SubAck,
    Subscribe,
    Subscription,
    UnsubAck,
    Unsubscribe,
)
from roost.mqtt.properties import decode_properties
from roost.mqtt.reason_codes import ALLOWED, MALFORMED_PACKET, PROTOCOL_ERROR, V3_SUBACK_FAILURE
from roost.mqtt.topics import SHARE_PREFIX
from roost.mqtt.wire import Reader

_V3_SUBACK_CODES: Final = frozenset({0, 1, 2, V3_SUBACK_FAILURE})


def _decode_subscribe(r: Reader, flags: int, level: int, role: str) -> Subscribe:
    packet_id = _packet_id(r, SUBSCRIBE)
    props = decode_properties(r, SUBSCRIBE) if level == MQTT_5 else Properties()
    if len(props.subscription_identifiers) > 1:
        raise MQTTError(PROTOCOL_ERROR, "Subscription Identifier given more than once", SUBSCRIBE)
    subs: list[Subscription] = []
    while r.remaining():
        topic_filter = r.string("topic filter")
        options = r.byte("subscription options")
        if options & (0xC0 if level == MQTT_5 else 0xFC):
            raise MQTTError(MALFORMED_PACKET, "reserved subscription option bits set", SUBSCRIBE)
        qos = options & 0x03
        if qos == 3:
            raise MQTTError(MALFORMED_PACKET, "subscription QoS 3", SUBSCRIBE)
        no_local = bool(options & 0x04)
        retain_handling = (options >> 4) & 0x03
        if retain_handling == 3:
            raise MQTTError(PROTOCOL_ERROR, "retain handling 3", SUBSCRIBE)
        if no_local and topic_filter.startswith(SHARE_PREFIX):
            raise MQTTError(PROTOCOL_ERROR, "no-local on a shared subscription", SUBSCRIBE)
        subs.append(
            Subscription(topic_filter, qos, no_local, bool(options & 0x08), retain_handling)
        )
    if not subs:
        raise MQTTError(PROTOCOL_ERROR, "SUBSCRIBE without a topic filter", SUBSCRIBE)
    return Subscribe(packet_id, subs, props)


def _decode_suback(r: Reader, flags: int, level: int, role: str) -> SubAck:
    packet_id = _packet_id(r, SUBACK)
    props = decode_properties(r, SUBACK) if level == MQTT_5 else Properties()
    allowed = ALLOWED[SUBACK] if level == MQTT_5 else _V3_SUBACK_CODES
    codes = list(r.rest())
    for code in codes:
        if code not in allowed:
            raise MQTTError(PROTOCOL_ERROR, f"SUBACK reason code 0x{code:02X}", SUBACK)
    if not codes:
        raise MQTTError(PROTOCOL_ERROR, "SUBACK without a reason code", SUBACK)
    return SubAck(packet_id, codes, props)


def _decode_unsubscribe(r: Reader, flags: int, level: int, role: str) -> Unsubscribe:
    packet_id = _packet_id(r, UNSUBSCRIBE)
    props = decode_properties(r, UNSUBSCRIBE) if level == MQTT_5 else Properties()
    filters: list[str] = []
    while r.remaining():
        filters.append(r.string("topic filter"))
    if not filters:
        raise MQTTError(PROTOCOL_ERROR, "UNSUBSCRIBE without a topic filter", UNSUBSCRIBE)
    return Unsubscribe(packet_id, filters, props)


def _decode_unsuback(r: Reader, flags: int, level: int, role: str) -> UnsubAck:
    packet_id = _packet_id(r, UNSUBACK)
    if level < MQTT_5:
        _done(r, UNSUBACK)
        return UnsubAck(packet_id)
    props = decode_properties(r, UNSUBACK)
    codes = list(r.rest())
    for code in codes:
        if code not in ALLOWED[UNSUBACK]:
            raise MQTTError(PROTOCOL_ERROR, f"UNSUBACK reason code 0x{code:02X}", UNSUBACK)
    if not codes:
        raise MQTTError(PROTOCOL_ERROR, "UNSUBACK without a reason code", UNSUBACK)
    return UnsubAck(packet_id, codes, props)
