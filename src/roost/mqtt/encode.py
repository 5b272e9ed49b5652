"""Encoders of every MQTT packet at each protocol level. Below level 5, properties and
the reason codes of acknowledgements are left off the wire; CONNACK's ``reason_code``
is then the 3.x return code, and SUBACK failures all become 0x80."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from roost.mqtt.packets import (
    AUTH,
    CONNACK,
    CONNECT,
    LEVELS,
    MQTT_3_1_1,
    MQTT_5,
    PROTOCOL_NAMES,
    PUBLISH,
    PUBREL,
    SUBACK,
    SUBSCRIBE,
    UNSUBACK,
    UNSUBSCRIBE,
    WILL,
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    Packet,
    PingReq,
    PingResp,
    Properties,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    SubAck,
    Subscribe,
    UnsubAck,
    Unsubscribe,
)
from roost.mqtt.properties import encode_properties
from roost.mqtt.reason_codes import (
    V3_SUBACK_FAILURE,
)
from roost.mqtt.wire import (
    encode_binary,
    encode_string,
    encode_varint,
)


def _frame(first: int, *parts: bytes) -> bytes:
    body = b"".join(parts)
    return bytes((first,)) + encode_varint(len(body)) + body


def _props(props: Properties, ptype: int, level: int) -> bytes:
    return encode_properties(props, ptype) if level == MQTT_5 else b""


def _u16(value: int) -> bytes:
    return value.to_bytes(2, "big")


def _encode_connect(p: Connect, level: int) -> bytes:
    level = p.protocol_level
    if level not in LEVELS:
        raise ValueError(f"unknown protocol level {level}")
    flags = 0x02 if p.clean_start else 0
    tail: list[bytes] = [encode_string(p.client_id)]
    if p.will is not None:
        will = p.will
        flags |= 0x04 | (will.qos << 3) | (0x20 if will.retain else 0)
        tail += [_props(will.properties, WILL, level), encode_string(will.topic),
                 encode_binary(will.payload)]
    if p.username is not None:
        flags |= 0x80
        tail.append(encode_string(p.username))
    if p.password is not None:
        flags |= 0x40
        tail.append(encode_binary(p.password))
    return _frame(
        CONNECT << 4,
        encode_string(PROTOCOL_NAMES[level]),
        bytes((level, flags)),
        _u16(p.keep_alive),
        _props(p.properties, CONNECT, level),
        *tail,
    )


def _encode_connack(p: ConnAck, level: int) -> bytes:
    # 3.1's first byte is reserved: session present came with 3.1.1
    present = p.session_present and level >= MQTT_3_1_1
    head = bytes((1 if present else 0, p.reason_code))
    return _frame(CONNACK << 4, head, _props(p.properties, CONNACK, level))


def _encode_publish(p: Publish, level: int) -> bytes:
    if p.qos not in (0, 1, 2):
        raise ValueError(f"QoS {p.qos}")
    first = PUBLISH << 4 | p.qos << 1 | (0x08 if p.dup else 0) | (0x01 if p.retain else 0)
    if p.qos:
        if not p.packet_id:
            raise ValueError("a QoS 1 or 2 PUBLISH needs a packet identifier")
        packet_id = _u16(p.packet_id)
    else:
        packet_id = b""
    return _frame(
        first, encode_string(p.topic), packet_id, _props(p.properties, PUBLISH, level), p.payload
    )


def _encode_ack(p: PubAck | PubRec | PubRel | PubComp, level: int) -> bytes:
    ptype = p.packet_type
    first = ptype << 4 | (0x02 if ptype == PUBREL else 0)
    if level < MQTT_5:
        return _frame(first, _u16(p.packet_id))
    props = encode_properties(p.properties, ptype)
    if props == b"\x00":  # both may be left off (3.4.2.1)
        if not p.reason_code:
            return _frame(first, _u16(p.packet_id))
        return _frame(first, _u16(p.packet_id), bytes((p.reason_code,)))
    return _frame(first, _u16(p.packet_id), bytes((p.reason_code,)), props)


def _encode_subscribe(p: Subscribe, level: int) -> bytes:
    parts: list[bytes] = []
    for sub in p.subscriptions:
        options = sub.qos
        if level == MQTT_5:
            options |= (
                (0x04 if sub.no_local else 0)
                | (0x08 if sub.retain_as_published else 0)
                | sub.retain_handling << 4
            )
        parts += [encode_string(sub.topic_filter), bytes((options,))]
    return _frame(
        SUBSCRIBE << 4 | 0x02, _u16(p.packet_id), _props(p.properties, SUBSCRIBE, level), *parts
    )


def _encode_suback(p: SubAck, level: int) -> bytes:
    codes = p.reason_codes
    if level < MQTT_5:
        codes = [V3_SUBACK_FAILURE if code >= 0x80 else code for code in codes]
    return _frame(
        SUBACK << 4, _u16(p.packet_id), _props(p.properties, SUBACK, level), bytes(codes)
    )


def _encode_unsubscribe(p: Unsubscribe, level: int) -> bytes:
    return _frame(
        UNSUBSCRIBE << 4 | 0x02,
        _u16(p.packet_id),
        _props(p.properties, UNSUBSCRIBE, level),
        *(encode_string(f) for f in p.topic_filters),
    )


def _encode_unsuback(p: UnsubAck, level: int) -> bytes:
    if level < MQTT_5:
        return _frame(UNSUBACK << 4, _u16(p.packet_id))
    return _frame(
        UNSUBACK << 4,
        _u16(p.packet_id),
        encode_properties(p.properties, UNSUBACK),
        bytes(p.reason_codes),
    )


def _encode_pingreq(p: PingReq, level: int) -> bytes:
    return b"\xc0\x00"


def _encode_pingresp(p: PingResp, level: int) -> bytes:
    return b"\xd0\x00"


def _encode_reason_only(p: Disconnect | Auth, level: int) -> bytes:
    first = p.packet_type << 4
    if level < MQTT_5:
        if p.packet_type == AUTH:
            raise ValueError("AUTH exists only in MQTT 5")
        return _frame(first)
    props = encode_properties(p.properties, p.packet_type)
    if props == b"\x00":
        return _frame(first, bytes((p.reason_code,))) if p.reason_code else _frame(first)
    return _frame(first, bytes((p.reason_code,)), props)


_ENCODERS: Final[dict[type, Callable[[Any, int], bytes]]] = {
    Connect: _encode_connect,
    ConnAck: _encode_connack,
    Publish: _encode_publish,
    PubAck: _encode_ack,
    PubRec: _encode_ack,
    PubRel: _encode_ack,
    PubComp: _encode_ack,
    Subscribe: _encode_subscribe,
    SubAck: _encode_suback,
    Unsubscribe: _encode_unsubscribe,
    UnsubAck: _encode_unsuback,
    PingReq: _encode_pingreq,
    PingResp: _encode_pingresp,
    Disconnect: _encode_reason_only,
    Auth: _encode_reason_only,
}


def encode(packet: Packet, protocol_level: int) -> bytes:
    """The packet's bytes at a protocol level (a CONNECT uses its own). Below level 5,
    properties and the reason codes of acknowledgements are not on the wire and are
    left out; CONNACK's ``reason_code`` is then the 3.x return code."""
    return _ENCODERS[type(packet)](packet, protocol_level)
