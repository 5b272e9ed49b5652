"""The AMQP 1.0 message format that stream clients put in a Publish and read from a
chunk (rstream's ``AMQPMessage``, the Java client's codec): a message as sections, each
a described type (AMQP 1.0 part 3, "Message Format"; the types of part 1, "Types").

Only what maps onto a Roost message is kept: the properties section (message-id,
correlation-id, reply-to, content-type, content-encoding, creation-time, subject,
user-id), the application properties (the headers) and the body (data sections, or an
amqp-value of binary or string). ``decode_message`` returns None for bytes that are not
such a message (a client sending raw bytes, as rstream does for a plain ``bytes``), so
the adapter keeps them as they are. ``encode_message`` is its inverse for delivery.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any

HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
AMQP_SEQUENCE = 0x76
AMQP_VALUE = 0x77
FOOTER = 0x78

_FIXED = {
    0x50: (1, struct.Struct(">B")), 0x51: (1, struct.Struct(">b")),
    0x60: (2, struct.Struct(">H")), 0x61: (2, struct.Struct(">h")),
    0x70: (4, struct.Struct(">I")), 0x71: (4, struct.Struct(">i")),
    0x52: (1, struct.Struct(">B")), 0x54: (1, struct.Struct(">b")),
    0x80: (8, struct.Struct(">Q")), 0x81: (8, struct.Struct(">q")),
    0x53: (1, struct.Struct(">B")), 0x55: (1, struct.Struct(">b")),
    0x72: (4, struct.Struct(">f")), 0x82: (8, struct.Struct(">d")),
    0x73: (4, struct.Struct(">I")),
}
_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


class NotAMessage(ValueError):
    """The bytes are not an AMQP 1.0 message of sections."""


@dataclass
class Described:
    descriptor: Any
    value: Any


@dataclass
class AmqpMessage:
    body: bytes = b""
    properties: dict[str, Any] = field(default_factory=dict)
    application_properties: dict[str, Any] = field(default_factory=dict)


def _need(data: bytes, pos: int, n: int) -> None:
    if pos + n > len(data):
        raise NotAMessage("truncated")


def decode_value(data: bytes, pos: int) -> tuple[Any, int]:
    """One AMQP 1.0 value at ``pos``: (value, position after it)."""
    _need(data, pos, 1)
    code = data[pos]
    pos += 1
    if code == 0xA1 and pos < len(data):  # str8 (map keys, most strings): the common case first
        end = pos + 1 + data[pos]
        _need(data, pos, end - pos)
        try:
            return str(data[pos + 1 : end], "utf-8"), end
        except UnicodeDecodeError as exc:
            raise NotAMessage("bad utf-8") from exc
    if code == 0x00:
        descriptor, pos = decode_value(data, pos)
        value, pos = decode_value(data, pos)
        return Described(descriptor, value), pos
    if code == 0x40:
        return None, pos
    if code in (0x41, 0x42):
        return code == 0x41, pos
    if code == 0x56:
        _need(data, pos, 1)
        return data[pos] != 0, pos + 1
    if code in (0x43, 0x44):
        return 0, pos
    if code == 0x45:
        return [], pos
    fixed = _FIXED.get(code)
    if fixed is not None:
        size, st = fixed
        _need(data, pos, size)
        value = st.unpack_from(data, pos)[0]
        return (chr(value) if code == 0x73 else value), pos + size
    if code == 0x83:
        _need(data, pos, 8)
        ms = _I64.unpack_from(data, pos)[0]
        return _EPOCH + datetime.timedelta(milliseconds=ms), pos + 8
    if code == 0x98:
        _need(data, pos, 16)
        return uuid.UUID(bytes=bytes(data[pos : pos + 16])), pos + 16
    if code in (0xA0, 0xA1, 0xA3, 0xB0, 0xB1, 0xB3):
        wide = code >= 0xB0
        _need(data, pos, 4 if wide else 1)
        n = _U32.unpack_from(data, pos)[0] if wide else data[pos]
        pos += 4 if wide else 1
        _need(data, pos, n)
        raw = bytes(data[pos : pos + n])
        if code in (0xA0, 0xB0):
            return raw, pos + n
        try:
            return raw.decode("utf-8"), pos + n
        except UnicodeDecodeError as exc:
            raise NotAMessage("bad utf-8") from exc
    if code in (0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0):
        wide = code >= 0xD0
        _need(data, pos, 8 if wide else 2)
        if wide:
            size, count = struct.unpack_from(">II", data, pos)
            pos += 8
            end = pos + size - 4
        else:
            size, count = data[pos], data[pos + 1]
            pos += 2
            end = pos + size - 1
        if end > len(data) or end < pos:
            raise NotAMessage("compound runs past the end")
        if code in (0xE0, 0xF0):
            items = _decode_array(data, pos, count, end)
            return items, end
        items = []
        for _ in range(count):
            item, pos = decode_value(data, pos)
            items.append(item)
        if pos != end:
            raise NotAMessage("compound size mismatch")
        if code in (0xC1, 0xD1):
            if count % 2:
                raise NotAMessage("odd map")
            return {_key(items[i]): items[i + 1] for i in range(0, count, 2)}, pos
        return items, pos
    raise NotAMessage(f"type code 0x{code:02x}")


def _key(value: Any) -> Any:
    return value if isinstance(value, str | int | bool | bytes) or value is None else str(value)


def _decode_array(data: bytes, pos: int, count: int, end: int) -> list[Any]:
    """An array: one constructor, then ``count`` values without their own."""
    _need(data, pos, 1)
    code = data[pos]
    out: list[Any] = []
    body_pos = pos + 1
    for _ in range(count):
        # decode each element as if it carried the shared constructor
        chunk = bytes([code]) + bytes(data[body_pos:end])
        value, used = decode_value(chunk, 0)
        out.append(value)
        body_pos += used - 1
    return out


def decode_message(data: bytes) -> AmqpMessage | None:
    """The message, or None when ``data`` is not a sequence of AMQP 1.0 sections."""
    if not data or data[0] != 0x00:
        return None
    single = data_only(data)
    if single is not None:
        return AmqpMessage(single)
    out = AmqpMessage()
    body: list[bytes] = []
    pos = 0
    end = len(data)
    try:
        while pos < end:
            # a small-ulong descriptor (what clients send) is read here, and so is a short
            # data section: through decode_value, a message of application properties and
            # a body took ~9 us, which every AMQP/STOMP/Spark read of it pays (chunk records)
            if data[pos + 1] == 0x53 and data[pos] == 0x00:
                kind = data[pos + 2]
                pos += 3
                if kind == DATA and data[pos] == 0xA0 and pos + 2 + data[pos + 1] <= end:
                    body.append(bytes(data[pos + 2 : pos + 2 + data[pos + 1]]))
                    pos += 2 + data[pos + 1]
                    continue
                value, pos = decode_value(data, pos)
            else:
                section, pos = decode_value(data, pos)
                if not isinstance(section, Described) or not isinstance(section.descriptor, int):
                    return None
                kind, value = section.descriptor, section.value
            if kind == PROPERTIES and isinstance(value, list):
                out.properties = properties_of(value)
            elif kind == APPLICATION_PROPERTIES and isinstance(value, dict):
                out.application_properties = {str(k): v for k, v in value.items()}
            elif kind == DATA and isinstance(value, bytes):
                body.append(value)
            elif kind == AMQP_VALUE and isinstance(value, bytes | str):
                body.append(value.encode() if isinstance(value, str) else value)
            elif kind not in (HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, FOOTER):
                return None  # a sequence, or a value that is not bytes: kept as sent
    except (ValueError, OverflowError, struct.error, IndexError, RecursionError):
        # NotAMessage, and values no Python object holds (a char past U+10FFFF, a
        # timestamp past year 9999): kept as sent, as bytes, not a reader's crash
        return None
    out.body = b"".join(body)
    return out


def data_only(data: bytes) -> bytes | None:
    """The body of a message that is one data section and nothing else (what rstream's
    ``AMQPMessage(body=...)`` sends), without the general decoder; None otherwise."""
    if data[:3] != b"\x00Su" or len(data) < 5:
        return None
    if data[3] == 0xA0 and len(data) == 5 + data[4]:
        return data[5:]
    if data[3] == 0xB0 and len(data) >= 8 and len(data) == 8 + _U32.unpack_from(data, 4)[0]:
        return data[8:]
    return None


_PROPERTY_NAMES = (
    "message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
    "content_encoding", "absolute_expiry_time", "creation_time", "group_id",
    "group_sequence", "reply_to_group_id",
)


def properties_of(values: list[Any]) -> dict[str, Any]:
    """The properties section's fields (a list) by name, those set."""
    return {
        name: value for name, value in zip(_PROPERTY_NAMES, values, strict=False)
        if value is not None
    }


# -- encoding ------------------------------------------------------------------------------


def _str(value: str, small: int = 0xA1, big: int = 0xB1) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) < 256:
        return bytes((small, len(raw))) + raw
    return bytes((big,)) + _U32.pack(len(raw)) + raw


def _binary(value: bytes) -> bytes:
    if len(value) < 256:
        return bytes((0xA0, len(value))) + value
    return b"\xb0" + _U32.pack(len(value)) + value


def encode_value(value: Any) -> bytes:
    if value is None:
        return b"\x40"
    if isinstance(value, bool):
        return b"\x41" if value else b"\x42"
    if isinstance(value, int):
        if -128 <= value <= 127:
            return b"\x55" + struct.pack(">b", value)
        if -(2**63) <= value < 2**63:
            return b"\x81" + _I64.pack(value)
        return _str(str(value))
    if isinstance(value, float):
        return b"\x82" + struct.pack(">d", value)
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, bytes | bytearray):
        return _binary(bytes(value))
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return b"\x83" + _I64.pack(int(value.timestamp() * 1000))
    if isinstance(value, uuid.UUID):
        return b"\x98" + value.bytes
    if isinstance(value, dict):
        return _compound(0xC1, 0xD1, [x for k, v in value.items() for x in (str(k), v)])
    if isinstance(value, list | tuple):
        return _compound(0xC0, 0xD0, list(value))
    return _str(str(value))


def _compound(small: int, big: int, items: list[Any]) -> bytes:
    body = b"".join(encode_value(i) for i in items)
    if len(body) + 1 < 256 and len(items) < 256:
        return bytes((small, len(body) + 1, len(items))) + body
    return bytes((big,)) + struct.pack(">II", len(body) + 4, len(items)) + body


def _section(descriptor: int, value: bytes) -> bytes:
    return bytes((0x00, 0x53, descriptor)) + value


def encode_data(body: bytes) -> bytes:
    """A message of one data section."""
    if len(body) < 256:
        return bytes((0x00, 0x53, DATA, 0xA0, len(body))) + body
    return b"\x00\x53\x75\xb0" + _U32.pack(len(body)) + body


def encode_message(
    body: bytes, properties: dict[str, Any], application_properties: dict[str, Any]
) -> bytes:
    """A message of a properties section (when any), application properties (when any)
    and one data section."""
    out = []
    if properties:
        values = [properties.get(name) for name in _PROPERTY_NAMES]
        while values and values[-1] is None:
            values.pop()
        fields = []
        for name, value in zip(_PROPERTY_NAMES, values, strict=False):
            if value is None:
                fields.append(b"\x40")
            elif name in ("content_type", "content_encoding"):
                fields.append(_str(str(value), 0xA3, 0xB3))  # symbols
            elif name == "user_id":
                fields.append(_binary(value if isinstance(value, bytes) else str(value).encode()))
            else:
                fields.append(encode_value(value))
        body_bytes = b"".join(fields)
        if len(body_bytes) + 1 < 256:
            listed = bytes((0xC0, len(body_bytes) + 1, len(fields))) + body_bytes
        else:
            listed = b"\xd0" + struct.pack(">II", len(body_bytes) + 4, len(fields)) + body_bytes
        out.append(_section(PROPERTIES, listed))
    if application_properties:
        out.append(_section(APPLICATION_PROPERTIES, encode_value(application_properties)))
    out.append(_section(DATA, _binary(body)))
    return b"".join(out)
