"""MQTT 5 properties (spec 2.2.2): every property id with its wire type and the packets
that may carry it (table 2.2.2.2), and their encoding and decoding.

A property block is a variable byte integer length, then (id, value) pairs; the id is
a variable byte integer too, though every defined id fits in one byte. Decoding
enforces the spec's rules:

- an id the packet may not carry, or an unknown id: Malformed Packet (2.2.2.2);
- a property given twice, except User Property and PUBLISH's Subscription
  Identifier: Protocol Error (3.x.2.x "more than once");
- a value out of range (a flag byte not 0/1, Receive Maximum / Maximum Packet Size /
  Topic Alias / Subscription Identifier of 0, Maximum QoS not 0/1): Protocol Error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    AUTH,
    CONNACK,
    CONNECT,
    DISCONNECT,
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
    Properties,
)
from roost.mqtt.reason_codes import MALFORMED_PACKET, PROTOCOL_ERROR
from roost.mqtt.wire import Reader, encode_binary, encode_string, encode_varint

# wire types (spec 1.5)
BYTE: Final = "byte"
TWO_BYTE_INTEGER: Final = "two byte integer"
FOUR_BYTE_INTEGER: Final = "four byte integer"
VARIABLE_BYTE_INTEGER: Final = "variable byte integer"
UTF8_STRING: Final = "UTF-8 string"
BINARY_DATA: Final = "binary data"
UTF8_STRING_PAIR: Final = "UTF-8 string pair"


@dataclass(frozen=True, slots=True)
class PropertySpec:
    id: int
    name: str  # the spec's name
    attr: str  # the ``Properties`` attribute
    type: str
    packets: frozenset[int]
    repeatable: bool = False
    # values that are a protocol error (flags: anything but 0/1)
    flag: bool = False
    nonzero: bool = False


def _spec(
    id_: int, name: str, type_: str, packets: set[int], **kw: Any
) -> tuple[int, PropertySpec]:
    attr = name.lower().replace(" ", "_").replace("-", "_")
    return id_, PropertySpec(id_, name, kw.pop("attr", attr), type_, frozenset(packets), **kw)


_ACKS = {PUBACK, PUBREC, PUBREL, PUBCOMP}
_ALL = {CONNECT, CONNACK, PUBLISH, WILL, SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK,
        DISCONNECT, AUTH} | _ACKS
_MESSAGE = {PUBLISH, WILL}

PROPERTIES: Final[dict[int, PropertySpec]] = dict(
    [
        _spec(0x01, "Payload Format Indicator", BYTE, _MESSAGE, flag=True),
        _spec(0x02, "Message Expiry Interval", FOUR_BYTE_INTEGER, _MESSAGE),
        _spec(0x03, "Content Type", UTF8_STRING, _MESSAGE),
        _spec(0x08, "Response Topic", UTF8_STRING, _MESSAGE),
        _spec(0x09, "Correlation Data", BINARY_DATA, _MESSAGE),
        _spec(0x0B, "Subscription Identifier", VARIABLE_BYTE_INTEGER, {PUBLISH, SUBSCRIBE},
              attr="subscription_identifiers", nonzero=True),
        _spec(0x11, "Session Expiry Interval", FOUR_BYTE_INTEGER, {CONNECT, CONNACK, DISCONNECT}),
        _spec(0x12, "Assigned Client Identifier", UTF8_STRING, {CONNACK}),
        _spec(0x13, "Server Keep Alive", TWO_BYTE_INTEGER, {CONNACK}),
        _spec(0x15, "Authentication Method", UTF8_STRING, {CONNECT, CONNACK, AUTH}),
        _spec(0x16, "Authentication Data", BINARY_DATA, {CONNECT, CONNACK, AUTH}),
        _spec(0x17, "Request Problem Information", BYTE, {CONNECT}, flag=True),
        _spec(0x18, "Will Delay Interval", FOUR_BYTE_INTEGER, {WILL}),
        _spec(0x19, "Request Response Information", BYTE, {CONNECT}, flag=True),
        _spec(0x1A, "Response Information", UTF8_STRING, {CONNACK}),
        _spec(0x1C, "Server Reference", UTF8_STRING, {CONNACK, DISCONNECT}),
        _spec(0x1F, "Reason String", UTF8_STRING,
              {CONNACK, SUBACK, UNSUBACK, DISCONNECT, AUTH} | _ACKS),
        _spec(0x21, "Receive Maximum", TWO_BYTE_INTEGER, {CONNECT, CONNACK}, nonzero=True),
        _spec(0x22, "Topic Alias Maximum", TWO_BYTE_INTEGER, {CONNECT, CONNACK}),
        _spec(0x23, "Topic Alias", TWO_BYTE_INTEGER, {PUBLISH}, nonzero=True),
        _spec(0x24, "Maximum QoS", BYTE, {CONNACK}, flag=True),
        _spec(0x25, "Retain Available", BYTE, {CONNACK}, flag=True),
        _spec(0x26, "User Property", UTF8_STRING_PAIR, _ALL, attr="user_properties",
              repeatable=True),
        _spec(0x27, "Maximum Packet Size", FOUR_BYTE_INTEGER, {CONNECT, CONNACK}, nonzero=True),
        _spec(0x28, "Wildcard Subscription Available", BYTE, {CONNACK}, flag=True),
        _spec(0x29, "Subscription Identifier Available", BYTE, {CONNACK}, flag=True),
        _spec(0x2A, "Shared Subscription Available", BYTE, {CONNACK}, flag=True),
    ]
)
BY_ATTR: Final = {spec.attr: spec for spec in PROPERTIES.values()}

# property ids by the spec's upper-case names, for readers of the spec
PAYLOAD_FORMAT_INDICATOR: Final = 0x01
MESSAGE_EXPIRY_INTERVAL: Final = 0x02
CONTENT_TYPE: Final = 0x03
RESPONSE_TOPIC: Final = 0x08
CORRELATION_DATA: Final = 0x09
SUBSCRIPTION_IDENTIFIER: Final = 0x0B
SESSION_EXPIRY_INTERVAL: Final = 0x11
ASSIGNED_CLIENT_IDENTIFIER: Final = 0x12
SERVER_KEEP_ALIVE: Final = 0x13
AUTHENTICATION_METHOD: Final = 0x15
AUTHENTICATION_DATA: Final = 0x16
REQUEST_PROBLEM_INFORMATION: Final = 0x17
WILL_DELAY_INTERVAL: Final = 0x18
REQUEST_RESPONSE_INFORMATION: Final = 0x19
RESPONSE_INFORMATION: Final = 0x1A
SERVER_REFERENCE: Final = 0x1C
REASON_STRING: Final = 0x1F
RECEIVE_MAXIMUM: Final = 0x21
TOPIC_ALIAS_MAXIMUM: Final = 0x22
TOPIC_ALIAS: Final = 0x23
MAXIMUM_QOS: Final = 0x24
RETAIN_AVAILABLE: Final = 0x25
USER_PROPERTY: Final = 0x26
MAXIMUM_PACKET_SIZE: Final = 0x27
WILDCARD_SUBSCRIPTION_AVAILABLE: Final = 0x28
SUBSCRIPTION_IDENTIFIER_AVAILABLE: Final = 0x29
SHARED_SUBSCRIPTION_AVAILABLE: Final = 0x2A

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_EMPTY_BLOCK: Final = b"\x00"


def _encode_value(spec: PropertySpec, value: Any) -> bytes:
    type_ = spec.type
    if type_ == BYTE:
        return bytes((value,))
    if type_ == TWO_BYTE_INTEGER:
        return _U16.pack(value)
    if type_ == FOUR_BYTE_INTEGER:
        return _U32.pack(value)
    if type_ == VARIABLE_BYTE_INTEGER:
        return encode_varint(value)
    if type_ == UTF8_STRING:
        return encode_string(value)
    if type_ == BINARY_DATA:
        return encode_binary(value)
    key, val = value
    return encode_string(key) + encode_string(val)


def encode_properties(props: Properties, packet_type: int) -> bytes:
    """The property block (length + properties) in id order; a property the packet may
    not carry is a ``ValueError`` (a bug in the caller, not the peer)."""
    parts: list[bytes] = []
    for id_, spec in PROPERTIES.items():
        value = getattr(props, spec.attr)
        if value is None or value == []:
            continue
        if packet_type not in spec.packets:
            raise ValueError(f"{spec.name} is not allowed in this packet")
        head = encode_varint(id_)
        values = value if isinstance(value, list) else [value]
        if len(values) > 1 and not spec.repeatable and packet_type != PUBLISH:
            raise ValueError(f"{spec.name} given more than once")
        for item in values:
            parts.append(head + _encode_value(spec, item))
    if not parts:
        return _EMPTY_BLOCK
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _decode_value(spec: PropertySpec, reader: Reader) -> Any:
    type_ = spec.type
    what = spec.name
    if type_ == BYTE:
        return reader.byte(what)
    if type_ == TWO_BYTE_INTEGER:
        return reader.u16(what)
    if type_ == FOUR_BYTE_INTEGER:
        return reader.u32(what)
    if type_ == VARIABLE_BYTE_INTEGER:
        return reader.varint(what)
    if type_ == UTF8_STRING:
        return reader.string(what)
    if type_ == BINARY_DATA:
        return reader.binary(what)
    return (reader.string(what + " name"), reader.string(what + " value"))


def decode_properties(reader: Reader, packet_type: int) -> Properties:
    """Reads a property block at the reader's position."""
    length = reader.varint("property length")
    if length > reader.remaining():
        raise MQTTError(MALFORMED_PACKET, "property length runs past the packet", packet_type)
    props = Properties()
    if not length:
        return props
    end = reader.pos + length
    block = Reader(reader.data, reader.pos, end)
    seen: set[int] = set()
    while block.pos < end:
        id_ = block.varint("property identifier")
        spec = PROPERTIES.get(id_)
        if spec is None or packet_type not in spec.packets:
            raise MQTTError(
                MALFORMED_PACKET, f"property 0x{id_:02X} is not allowed here", packet_type
            )
        value = _decode_value(spec, block)
        if spec.flag and value not in (0, 1):
            raise MQTTError(PROTOCOL_ERROR, f"{spec.name} must be 0 or 1", packet_type)
        if spec.nonzero and value == 0:
            raise MQTTError(PROTOCOL_ERROR, f"{spec.name} must not be 0", packet_type)
        if spec.repeatable or (id_ == SUBSCRIPTION_IDENTIFIER and packet_type == PUBLISH):
            getattr(props, spec.attr).append(value)
            continue
        if id_ in seen:
            raise MQTTError(PROTOCOL_ERROR, f"{spec.name} given more than once", packet_type)
        seen.add(id_)
        if id_ == SUBSCRIPTION_IDENTIFIER:
            props.subscription_identifiers.append(value)
        else:
            setattr(props, spec.attr, value)
    reader.pos = end
    return props
