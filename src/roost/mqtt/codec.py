"""Sans-IO MQTT 3.1, 3.1.1 and 5.0: ``PacketReader.feed()`` then ``next_packet()``, which
returns a packet (``packets.py``) or ``NEED_DATA``, and ``encode(packet, level)``.

Only malformed or forbidden input raises, always ``MQTTError`` with the MQTT 5 reason
code the server answers with (DISCONNECT, or CONNACK during the handshake; a 3.x
session maps or just closes, see ``reason_codes.connack_code_v3``).

Framing (MQTT 5 spec 2.1, the same in 3.1.1 2.2 and 3.1): a fixed header of one byte
(packet type in the high nibble, flags in the low one) and the remaining length as a
variable byte integer (1.5.5, at most four bytes), then that many bytes of variable
header and payload. The reader checks the type and flags from the first byte and the
whole packet's size (fixed header included, as MQTT 5's Maximum Packet Size counts it)
as soon as the remaining length is complete: a packet above ``max_packet_size`` is
refused (0x95 Packet too large) before its body is buffered.

Protocol levels: CONNECT is decoded on its own (its protocol name and level say how,
3.1 is "MQIsdp" level 3 as RabbitMQ accepts it); every other packet needs the level,
which the session sets on the reader (``reader.protocol_level = connect.protocol_level``)
once it has accepted the CONNECT. Until then only CONNECT is accepted (server role).
``role`` says which side's packets are read: "server" reads what clients send.

Where each packet's layout comes from (MQTT 5.0 spec section, 3.1.1 section):
CONNECT 3.1 / 3.1; CONNACK 3.2 / 3.2; PUBLISH 3.3 / 3.3; PUBACK, PUBREC, PUBREL, PUBCOMP
3.4-3.7 / 3.4-3.7; SUBSCRIBE 3.8 / 3.8 (subscription options 3.8.3.1); SUBACK 3.9 /
3.9; UNSUBSCRIBE 3.10 / 3.10; UNSUBACK 3.11 / 3.11; PINGREQ, PINGRESP 3.12-3.13 /
3.12-3.13; DISCONNECT 3.14 / 3.14; AUTH 3.15 (5.0 only). Properties: 2.2.2
(``properties.py``); reason codes: 2.4 (``reason_codes.py``); strings: 1.5
(``wire.py``); topics: 4.7 (``topics.py``).

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
    MQTT_3_1,
    MQTT_3_1_1,
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
from roost.mqtt.properties import decode_properties, encode_properties
from roost.mqtt.reason_codes import (
    ALLOWED,
    MALFORMED_PACKET,
    PACKET_TOO_LARGE,
    PROTOCOL_ERROR,
    TOPIC_NAME_INVALID,
    UNSUPPORTED_PROTOCOL_VERSION,
    V3_SUBACK_FAILURE,
)
from roost.mqtt.topics import SHARE_PREFIX, validate_topic_name
from roost.mqtt.wire import (
    MAX_VARINT,
    Reader,
    decode_varint,
    encode_binary,
    encode_string,
    encode_varint,
)

__all__ = ["MAX_PACKET_SIZE", "NEED_DATA", "PacketReader", "decode_packet", "encode"]


class _NeedData:
    """The type of ``NEED_DATA``: more bytes are needed before the next packet."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()

MAX_PACKET_SIZE: Final = 1 + 4 + MAX_VARINT  # the largest packet the framing can carry
LEVELS: Final = frozenset({MQTT_3_1, MQTT_3_1_1, MQTT_5})

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


def _check_first_byte(first: int, level: int | None, role: str) -> None:
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


class PacketReader:
    """Incremental reader of one connection's packets."""

    def __init__(
        self,
        *,
        role: str = "server",
        protocol_level: int | None = None,
        max_packet_size: int = MAX_PACKET_SIZE,
    ) -> None:
        if role not in ("server", "client"):
            raise ValueError(f"role must be 'server' or 'client', not {role!r}")
        if role == "client" and protocol_level is None:
            raise ValueError("a client knows its protocol level: pass protocol_level")
        if protocol_level is not None and protocol_level not in LEVELS:
            raise ValueError(f"unknown protocol level {protocol_level}")
        self.role = role
        self.protocol_level = protocol_level
        self.max_packet_size = max_packet_size
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_packet(self) -> Packet | _NeedData:
        buf = self._buf
        pos = self._pos
        if pos >= len(buf):
            return NEED_DATA
        first = buf[pos]
        level = self.protocol_level
        _check_first_byte(first, level, self.role)
        length_end = decode_varint(buf, pos + 1)
        if length_end is None:
            return NEED_DATA
        length, start = length_end
        end = start + length
        if end - pos > self.max_packet_size:
            raise MQTTError(
                PACKET_TOO_LARGE,
                f"{end - pos} byte packet above the maximum of {self.max_packet_size}",
                first >> 4,
            )
        if len(buf) < end:
            return NEED_DATA
        body = memoryview(bytes(buf[start:end]))
        self._pos = end
        if end > 65_536 and end * 2 > len(buf):  # keep the buffer from growing forever
            del buf[:end]
            self._pos = 0
        return decode_packet(first, body, level, self.role)

    def packets(self) -> list[Packet]:
        """Every complete packet in the buffer."""
        out: list[Packet] = []
        while True:
            packet = self.next_packet()
            if isinstance(packet, _NeedData):
                return out
            out.append(packet)


# -- decoding ----------------------------------------------------------------------------


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
    qos = (flags >> 1) & 0x03
    dup = bool(flags & 0x08)
    if dup and not qos:
        raise MQTTError(PROTOCOL_ERROR, "DUP set on a QoS 0 PUBLISH", PUBLISH)
    topic = r.string("topic name")
    packet_id = _packet_id(r, PUBLISH) if qos else None
    props = decode_properties(r, PUBLISH) if level == MQTT_5 else Properties()
    if topic:
        validate_topic_name(topic)
    elif level < MQTT_5:
        raise MQTTError(TOPIC_NAME_INVALID, "empty topic name", PUBLISH)
    elif props.topic_alias is None:
        raise MQTTError(PROTOCOL_ERROR, "empty topic name without a topic alias", PUBLISH)
    if role == "server" and props.subscription_identifiers:
        raise MQTTError(PROTOCOL_ERROR, "subscription identifier from a client", PUBLISH)
    return Publish(topic, r.rest(), qos, bool(flags & 0x01), dup, packet_id, props)


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
    first_byte: int, body: memoryview, protocol_level: int | None, role: str = "server"
) -> Packet:
    """One packet from its fixed header's first byte and its body (the bytes after the
    remaining length)."""
    _check_first_byte(first_byte, protocol_level, role)
    return _DECODERS[first_byte >> 4](Reader(body), first_byte & 0x0F, protocol_level, role)


# -- encoding ----------------------------------------------------------------------------


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
