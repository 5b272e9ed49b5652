"""How a message kept as sent in a chunk record (store/stream_chunk.py) reads for AMQP
0-9-1, STOMP and Spark: its properties in the store's encoding (codecs/properties.py) and body.

Every such read maps every message again, so the shapes stream clients send most
(rstream's ``AMQPMessage(body=..., properties=..., application_properties={...})``: a
properties section, an application-properties map of simple values, or both, then one
data section) are transcoded here straight from the AMQP 1.0 bytes to the store's
encoding, without building a message, a ``Properties`` and a header dict first: 1.2-1.4
us a message of one header against 6-9 us through ``chunk_message_values`` and
``encode_properties`` (timeit; bench/spark_superstream.py has the reads). Anything else
(annotations, nested or unusual header values, repeated keys, bad UTF-8, another order)
takes the general way, which gives the same bytes (tests/stream_protocol/
test_chunk_mapping.py compares the two over every cut and many altered bytes).
"""

from __future__ import annotations

import struct
from typing import Final

from roost.codecs.properties import encode_properties, encode_str
from roost.stream_protocol.amqp10 import decode_value, properties_of
from roost.stream_protocol.publishers import chunk_message_values, mapped_properties

_U32: Final = struct.Struct(">I")
_U16: Final = struct.Struct(">H")
_I64: Final = struct.Struct(">q")
_F64: Final = struct.Struct(">d")
_SIGNED: Final = {0x54: struct.Struct(">b"), 0x55: struct.Struct(">b"),
                  0x71: struct.Struct(">i"), 0x81: struct.Struct(">q")}
_UNSIGNED: Final = {0x52: struct.Struct(">B"), 0x53: struct.Struct(">B"),
                    0x70: struct.Struct(">I"), 0x80: struct.Struct(">Q")}
_PERSISTENT: Final = b"\x02"
_PROPERTIES: Final = b"\x00Ss"
_APP_PROPERTIES: Final = b"\x00St"
# where each of publishers.mapped_properties's values goes (core.message.PROPERTY_NAMES)
_MAPPED: Final = (0, 1, 5, 6, 8, 9, 10)
_TIMESTAMP: Final = 9
_DATA: Final = b"\x00Su"


def chunk_message_record(data: bytes) -> tuple[bytes, bytes]:
    """The encoded properties and the body of an AMQP 1.0 message of a chunk record: as
    ``encode_properties(chunk_message_values(data)[0])``, read the short way when it can."""
    found = _short_way(data)
    if found is not None:
        return found
    properties, body = chunk_message_values(data)
    return encode_properties(properties), body


def _short_way(data: bytes) -> tuple[bytes, bytes] | None:
    """A properties section, application properties (a map of string keys and simple
    values), or both in that order, then one data section and nothing else; None for any
    other message."""
    try:
        return _transcode(data)
    except (ValueError, OverflowError, IndexError, struct.error, RecursionError):
        return None  # cut or unusual: the general way decides (raw bytes, most often)


def _transcode(data: bytes) -> tuple[bytes, bytes] | None:
    pos, mask = 0, 1 << 3  # delivery mode 2
    before: list[bytes] = []  # content type and encoding: before the headers
    after: list[bytes] = []  # correlation id, reply to, message id, timestamp, type
    if data[:3] == _PROPERTIES:
        fields, pos = decode_value(data, 3)
        if not isinstance(fields, list):
            return None
        for index, value in zip(_MAPPED, mapped_properties(properties_of(fields)), strict=True):
            if value is not None:
                mask |= 1 << index
                encoded = _I64.pack(value) if index == _TIMESTAMP else encode_str(value)
                (before if index < 2 else after).append(encoded)
    headers: list[bytes] = []
    if data[pos : pos + 3] == _APP_PROPERTIES:
        pos = _headers(data, pos, headers)
        if pos < 0:
            return None
        mask |= 1 << 2
    elif not pos:
        return None  # neither section: not the short way's shape
    if data[pos : pos + 3] != _DATA:
        return None
    code, pos = data[pos + 3], pos + 4
    if code == 0xA0 and len(data) == pos + 1 + data[pos]:
        body = data[pos + 1 :]
    elif code == 0xB0 and len(data) == pos + 4 + _U32.unpack_from(data, pos)[0]:
        body = data[pos + 4 :]
    else:
        return None
    return b"".join((_U16.pack(mask), *before, *headers, _PERSISTENT, *after)), body


def _headers(data: bytes, pos: int, parts: list[bytes]) -> int:
    """The application properties at ``pos`` (a map8 or map32 of string keys and simple
    values) appended in the store's encoding of a header table; the position after them,
    or -1 for a map the general way must read."""
    if data[pos + 3] == 0xC1:
        end, count, pos = pos + 6 + data[pos + 4] - 1, data[pos + 5], pos + 6
    elif data[pos + 3] == 0xD1:
        size, count = _U32.unpack_from(data, pos + 4)[0], _U32.unpack_from(data, pos + 8)[0]
        end, pos = pos + 12 + size - 4, pos + 12
    else:
        return -1
    if count == 0 or count % 2 or end > len(data):
        return -1
    parts += (b"F", _U32.pack(count // 2))
    keys: set[bytes] = set()
    for _ in range(count // 2):
        if data[pos] == 0xA1:
            n, pos = data[pos + 1], pos + 2
        elif data[pos] == 0xB1:
            n, pos = _U32.unpack_from(data, pos + 1)[0], pos + 5
        else:
            return -1
        key = data[pos : pos + n]
        pos += n
        if len(key) != n or n > 0xFFFF:
            return -1  # cut, or longer than the store's u16-long keys
        if key in keys:
            return -1  # the general way keeps the last value of a repeated key
        keys.add(key)
        key.decode("utf-8")
        parts += (_U16.pack(n), key)
        pos = _value(data, pos, parts)
        if pos < 0:
            return -1
    return pos if pos == end else -1


def _value(data: bytes, pos: int, parts: list[bytes]) -> int:
    """Append the store's encoding (codec.encode_value) of the simple AMQP 1.0 value at
    ``pos``; the position after it, or -1 for a value the general way must read."""
    code = data[pos]
    pos += 1
    if code == 0xA1 or code == 0xB1:
        if code == 0xA1:
            n, pos = data[pos], pos + 1
        else:
            n, pos = _U32.unpack_from(data, pos)[0], pos + 4
        raw = data[pos : pos + n]
        if len(raw) != n:
            return -1
        raw.decode("utf-8")
        parts.append(b"S" + _U32.pack(n) + raw)
        return pos + n
    st = _SIGNED.get(code) or _UNSIGNED.get(code)
    if st is not None:
        value = st.unpack_from(data, pos)[0]
        if value >= 2**63:
            return -1  # a ulong past i64: the store writes it as text
        parts.append(b"l" + _I64.pack(value))
        return pos + st.size
    if code in (0x43, 0x44):  # uint0, ulong0
        parts.append(b"l" + _I64.pack(0))
        return pos
    if code == 0x56:
        parts.append(b"t" if data[pos] else b"f")
        return pos + 1
    if code in (0x41, 0x42):
        parts.append(b"t" if code == 0x41 else b"f")
        return pos
    if code == 0x40:
        parts.append(b"V")
        return pos
    if code == 0x82:
        parts.append(b"d" + _F64.pack(_F64.unpack_from(data, pos)[0]))
        return pos + 8
    return -1
