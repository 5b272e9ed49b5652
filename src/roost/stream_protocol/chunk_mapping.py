"""How a message kept as sent in a chunk record (store/stream_chunk.py) reads for AMQP
0-9-1, STOMP and Spark: its properties in the store's encoding (store/codec.py) and body.

Every such read maps every message again, so the shape stream clients send most (rstream's
``AMQPMessage(body=..., application_properties={...})``: one application-properties map
of simple values, then one data section) is transcoded here straight from the AMQP 1.0
bytes to the store's encoding, without building a message, a ``Properties`` and a header
dict first: 1.1 us a message against 5.6 us through ``chunk_message_values`` and
``encode_properties`` (timeit, one property; bench/spark_superstream.py has the read).
Anything else (a properties section, annotations, nested or unusual values, duplicate
keys, bad UTF-8) takes the general way, which gives the same bytes (tested).
"""

from __future__ import annotations

import struct
from typing import Final

from roost.store.codec import encode_properties
from roost.stream_protocol.publishers import chunk_message_values

_U32: Final = struct.Struct(">I")
_U16: Final = struct.Struct(">H")
_I64: Final = struct.Struct(">q")
_F64: Final = struct.Struct(">d")
_SIGNED: Final = {0x54: struct.Struct(">b"), 0x55: struct.Struct(">b"),
                  0x71: struct.Struct(">i"), 0x81: struct.Struct(">q")}
_UNSIGNED: Final = {0x52: struct.Struct(">B"), 0x53: struct.Struct(">B"),
                    0x70: struct.Struct(">I"), 0x80: struct.Struct(">Q")}
# headers (bit 2) and delivery mode (bit 3) set; delivery mode 2 after the headers
_MASK: Final = _U16.pack(1 << 2 | 1 << 3)
_PERSISTENT: Final = b"\x02"
_APP_PROPERTIES: Final = b"\x00St"
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
    """Application properties (a map of string keys and simple values) and one data
    section, and nothing else; None for any other message."""
    if data[:3] != _APP_PROPERTIES or len(data) < 12:
        return None
    if data[3] == 0xC1:
        end, count, pos = 6 + data[4] - 1, data[5], 6  # the size counts the count byte
    elif data[3] == 0xD1:
        size, count = _U32.unpack_from(data, 4)[0], _U32.unpack_from(data, 8)[0]
        end, pos = 12 + size - 4, 12
    else:
        return None
    if count == 0 or count % 2 or end > len(data):
        return None
    parts = [_MASK, b"F", _U32.pack(count // 2)]
    keys: set[bytes] = set()
    try:
        for _ in range(count // 2):
            if data[pos] == 0xA1:
                n, pos = data[pos + 1], pos + 2
            elif data[pos] == 0xB1:
                n, pos = _U32.unpack_from(data, pos + 1)[0], pos + 5
            else:
                return None
            key = data[pos : pos + n]
            pos += n
            if len(key) != n or n > 0xFFFF:
                return None  # cut, or longer than the store's u16-long keys
            if key in keys:
                return None  # the general way keeps the last value of a repeated key
            keys.add(key)
            key.decode("utf-8")
            parts.append(_U16.pack(len(key)))
            parts.append(key)
            pos = _value(data, pos, parts)
            if pos < 0:
                return None
    except (IndexError, UnicodeDecodeError, struct.error):
        return None
    if pos != end or data[pos : pos + 3] != _DATA:
        return None
    parts.append(_PERSISTENT)
    code, pos = data[pos + 3 : pos + 4], pos + 4
    if code == b"\xa0" and pos < len(data) and len(data) == pos + 1 + data[pos]:
        return b"".join(parts), data[pos + 1 :]
    if code == b"\xb0" and len(data) >= pos + 4 and len(data) == pos + 4 + _U32.unpack_from(
        data, pos
    )[0]:
        return b"".join(parts), data[pos + 4 :]
    return None


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
