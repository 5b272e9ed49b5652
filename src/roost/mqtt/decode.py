"""Decoders of every MQTT packet, both roles, all three protocol levels, and the checks
that refuse malformed input with its MQTT 5 reason code.

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

from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    AUTH,
    CONNACK,
    CONNECT,
    DISCONNECT,
    LEVELS,
    MQTT_5,
    PACKET_NAMES,
    PINGREQ,
    PINGRESP,
    PROTOCOL_NAMES,
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
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
    Subscription,
    UnsubAck,
    Unsubscribe,
    Will,
)
from roost.mqtt.properties import decode_properties
from roost.mqtt.reason_codes import (
    ALLOWED,
    MALFORMED_PACKET,
    PROTOCOL_ERROR,
    TOPIC_NAME_INVALID,
    UNSUPPORTED_PROTOCOL_VERSION,
    V3_SUBACK_FAILURE,
)
from roost.mqtt.topics import SHARE_PREFIX, validate_topic_name
from roost.mqtt.wire import (
    MAX_VARINT,
    Reader,
    check_utf8,
)

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
_V3_SUBACK_CODES: Final = frozenset({0, 1, 2, V3_SUBACK_FAILURE})


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



def _done(r: Reader, ptype: int) -> None:
    if r.remaining():
        raise MQTTError(
            MALFORMED_PACKET, f"{r.remaining()} bytes after the end of {PACKET_NAMES[ptype]}", ptype
        )


def _packet_id(r: Reader, ptype: int) -> int:
    packet_id = r.u16("packet identifier")
    if packet_id == 0:
        raise MQTTError(PROTOCOL_ERROR, "packet identifier 0", ptype)
    return packet_id


def _reason(r: Reader, ptype: int) -> int:
    code = r.byte("reason code")
    if code not in ALLOWED[ptype]:
        raise MQTTError(
            PROTOCOL_ERROR, f"reason code 0x{code:02X} is not one of {PACKET_NAMES[ptype]}'s", ptype
        )
    return code


def _check_auth_props(props: Properties, ptype: int) -> None:
    if props.authentication_data is not None and props.authentication_method is None:
        raise MQTTError(PROTOCOL_ERROR, "authentication data without a method", ptype)


def _decode_connect(r: Reader, flags: int, level: int | None, role: str) -> Connect:
    name = r.string("protocol name")
    level = r.byte("protocol level")
    if level not in LEVELS or PROTOCOL_NAMES[level] != name:
        raise MQTTError(
            UNSUPPORTED_PROTOCOL_VERSION, f"protocol {name!r} level {level}", CONNECT
        )
    cflags = r.byte("connect flags")
    if cflags & 0x01:
        raise MQTTError(MALFORMED_PACKET, "reserved connect flag set", CONNECT)
    will_flag = bool(cflags & 0x04)
    will_qos = (cflags >> 3) & 0x03
    will_retain = bool(cflags & 0x20)
    if will_qos == 3:
        raise MQTTError(MALFORMED_PACKET, "will QoS 3", CONNECT)
    if not will_flag and (will_qos or will_retain):
        raise MQTTError(MALFORMED_PACKET, "will QoS or retain without a will", CONNECT)
    has_password = bool(cflags & 0x40)
    has_username = bool(cflags & 0x80)
    if has_password and not has_username and level < MQTT_5:
        raise MQTTError(MALFORMED_PACKET, "password without a user name", CONNECT)
    keep_alive = r.u16("keep alive")
    props = decode_properties(r, CONNECT) if level == MQTT_5 else Properties()
    _check_auth_props(props, CONNECT)
    client_id = r.string("client identifier")
    will = None
    if will_flag:
        will_props = decode_properties(r, WILL) if level == MQTT_5 else Properties()
        topic = r.string("will topic")
        validate_topic_name(topic)
        will = Will(topic, r.binary("will payload"), will_qos, will_retain, will_props)
    username = r.string("user name") if has_username else None
    password = r.binary("password") if has_password else None
    _done(r, CONNECT)
    return Connect(
        client_id, level, bool(cflags & 0x02), keep_alive, username, password, will, props
    )


def _decode_connack(r: Reader, flags: int, level: int, role: str) -> ConnAck:
    ack_flags = r.byte("acknowledge flags")
    if ack_flags & 0xFE:
        raise MQTTError(MALFORMED_PACKET, "reserved acknowledge flags set", CONNACK)
    code = r.byte("reason code")
    if level == MQTT_5:
        if code not in ALLOWED[CONNACK]:
            raise MQTTError(PROTOCOL_ERROR, f"CONNACK reason code 0x{code:02X}", CONNACK)
        props = decode_properties(r, CONNACK)
        _check_auth_props(props, CONNACK)
    else:
        if code > 5:
            raise MQTTError(PROTOCOL_ERROR, f"CONNACK return code {code}", CONNACK)
        props = Properties()
    if code and ack_flags:
        raise MQTTError(PROTOCOL_ERROR, "session present on a refused connection", CONNACK)
    _done(r, CONNACK)
    return ConnAck(code, bool(ack_flags), props)


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


def _decode_pingreq(r: Reader, flags: int, level: int, role: str) -> PingReq:
    _done(r, PINGREQ)
    return PingReq()


def _decode_pingresp(r: Reader, flags: int, level: int, role: str) -> PingResp:
    _done(r, PINGRESP)
    return PingResp()


def _decode_disconnect(r: Reader, flags: int, level: int, role: str) -> Disconnect:
    code = 0
    props = Properties()
    if level == MQTT_5 and r.remaining():
        code = _reason(r, DISCONNECT)
        if r.remaining():
            props = decode_properties(r, DISCONNECT)
    _done(r, DISCONNECT)
    return Disconnect(code, props)


def _decode_auth(r: Reader, flags: int, level: int, role: str) -> Auth:
    code = 0
    props = Properties()
    if r.remaining():
        code = _reason(r, AUTH)
        if r.remaining():
            props = decode_properties(r, AUTH)
    _check_auth_props(props, AUTH)
    _done(r, AUTH)
    return Auth(code, props)


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

