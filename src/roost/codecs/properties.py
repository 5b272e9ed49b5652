"""Message properties in Roost's compact encoding, shared by the store and the adapters.

The store writes a message's fourteen properties this way in every record (store/codec.py,
codecs/stream_message.py), and the stream adapter transcodes rstream-written AMQP 1.0 messages
straight into it (stream_protocol/chunk_mapping.py): one codec, in neither layer, so an
adapter need not import the store. Stdlib only, no I/O.

``encode_properties``: a u16 mask of the properties set, then their values in mask order.
Strings are a u16 length + UTF-8, small ints one byte, the timestamp an i64, headers
through ``encode_value``: a tag byte and a value, recursively.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any, Final

# Final: a compiled module (docs/compiled.md) reads these as statics, not dict lookups
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_I64: Final = struct.Struct(">q")
_F64: Final = struct.Struct(">d")

# The fourteen properties in the core's order; which ones are strings, bytes, ints, tables.
PROPERTY_COUNT: Final = 14
_STRING: Final = frozenset({0, 1, 5, 6, 7, 8, 10, 11, 12, 13})
_OCTET: Final = frozenset({3, 4})  # delivery_mode, priority
_TIMESTAMP: Final = 9
_HEADERS: Final = 2


class CodecError(ValueError):
    """A payload that does not decode (checksum passed but content is not ours)."""


def encode_str(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _U16.pack(len(raw)) + raw


def encode_properties(properties: tuple[Any, ...]) -> bytes:
    """u16 mask of the properties set, then their values in order."""
    mask = 0
    parts: list[bytes] = [b""]
    for i, value in enumerate(properties):
        if value is None:
            continue
        mask |= 1 << i
        if i in _STRING:
            parts.append(encode_str(str(value)))
        elif i in _OCTET:
            parts.append(bytes((int(value) & 0xFF,)))
        elif i == _TIMESTAMP:
            parts.append(_I64.pack(int(value)))
        else:
            parts.append(encode_value(value))
    parts[0] = _U16.pack(mask)
    return b"".join(parts)


_NO_PROPERTIES: Final = (None,) * PROPERTY_COUNT

# How to read each property present in a mask: (index, kind), kind 0 string, 1 octet,
# 2 timestamp, 3 tagged value. Made once per mask (a stream has few distinct ones), so
# decoding walks only the properties set, with no set lookups per property.
_PLANS: Final[dict[int, tuple[tuple[int, int], ...]]] = {}


def _plan(mask: int) -> tuple[tuple[int, int], ...]:
    plan = tuple(
        (i, 0 if i in _STRING else 1 if i in _OCTET else 2 if i == _TIMESTAMP else 3)
        for i in range(PROPERTY_COUNT)
        if mask & (1 << i)
    )
    if len(_PLANS) < 4096:
        _PLANS[mask] = plan
    return plan


def decode_properties(data: bytes, pos: int) -> tuple[tuple[Any, ...], int]:
    """The fourteen properties at ``pos`` (as ``encode_properties`` wrote them) and the
    position after them. Raises IndexError/struct.error/ValueError on a short payload.
    This runs once per message read back (stream replay, the Spark reader): strings are
    read inline rather than through ``read_str``."""
    mask = data[pos] << 8 | data[pos + 1]
    pos += 2
    if not mask:
        return _NO_PROPERTIES, pos
    props: list[Any] = [None] * PROPERTY_COUNT
    for i, kind in _PLANS.get(mask) or _plan(mask):
        if kind == 0:
            end = pos + 2 + (data[pos] << 8 | data[pos + 1])
            if end > len(data):
                raise CodecError("string runs past the payload")
            props[i] = data[pos + 2 : end].decode("utf-8")
            pos = end
        elif kind == 1:
            props[i] = data[pos]
            pos += 1
        elif kind == 2:
            (props[i],) = _I64.unpack_from(data, pos)
            pos += 8
        else:
            props[i], pos = decode_value(data, pos)
    return tuple(props), pos


def read_str(data: bytes, pos: int) -> tuple[str, int]:
    """A u16-length UTF-8 string at ``pos`` and the position after it."""
    (n,) = _U16.unpack_from(data, pos)
    end = pos + 2 + n
    if end > len(data):
        raise CodecError("string runs past the payload")
    return data[pos + 2 : end].decode("utf-8"), end


# -- typed values (headers) -------------------------------------------------------------

_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def encode_value(value: Any) -> bytes:
    if value is None:
        return b"V"
    if value is True:
        return b"t"
    if value is False:
        return b"f"
    if isinstance(value, int):
        return (
            b"l" + _I64.pack(value) if -(2**63) <= value < 2**63 else b"s" + encode_str(str(value))
        )
    if isinstance(value, float):
        return b"d" + _F64.pack(value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return b"S" + _U32.pack(len(raw)) + raw
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return b"x" + _U32.pack(len(raw)) + raw
    if isinstance(value, decimal.Decimal):
        return b"D" + encode_str(str(value))
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return b"T" + _I64.pack(int((value - _EPOCH).total_seconds()))
    if isinstance(value, dict):
        parts = [b"F", _U32.pack(len(value))]
        for key, item in value.items():
            parts.append(encode_str(str(key)))
            parts.append(encode_value(item))
        return b"".join(parts)
    if isinstance(value, (list, tuple)):
        return b"".join((b"A", _U32.pack(len(value)), *(encode_value(v) for v in value)))
    return b"S" + _U32.pack(len(raw := str(value).encode("utf-8"))) + raw


# the common tags, as ints, tested first
_TAG_S: Final = 0x53  # b"S"
_TAG_X: Final = 0x78  # b"x"
_TAG_L: Final = 0x6C  # b"l"
_TAG_F: Final = 0x46  # b"F"


def decode_value(data: bytes, pos: int) -> tuple[Any, int]:
    tag_int = data[pos]
    if tag_int in (_TAG_S, _TAG_X):
        (n,) = _U32.unpack_from(data, pos + 1)
        end = pos + 5 + n
        if end > len(data):
            raise CodecError("value runs past the payload")
        raw = data[pos + 5 : end]
        return (raw.decode("utf-8") if tag_int == _TAG_S else raw), end
    if tag_int == _TAG_L:
        return _I64.unpack_from(data, pos + 1)[0], pos + 9
    if tag_int == _TAG_F:
        (n,) = _U32.unpack_from(data, pos + 1)
        pos += 5
        table: dict[str, Any] = {}
        for _ in range(n):
            end = pos + 2 + (data[pos] << 8 | data[pos + 1])
            if end > len(data):
                raise CodecError("string runs past the payload")
            key = data[pos + 2 : end].decode("utf-8")
            tag_int = data[end]
            if tag_int == _TAG_S:  # the usual header values, without a call each
                (n_value,) = _U32.unpack_from(data, end + 1)
                pos = end + 5 + n_value
                if pos > len(data):
                    raise CodecError("value runs past the payload")
                table[key] = data[end + 5 : pos].decode("utf-8")
            elif tag_int == _TAG_L:
                table[key] = _I64.unpack_from(data, end + 1)[0]
                pos = end + 9
            else:
                table[key], pos = decode_value(data, end)
        return table, pos
    tag = data[pos : pos + 1]
    pos += 1
    if tag == b"V":
        return None, pos
    if tag == b"t":
        return True, pos
    if tag == b"f":
        return False, pos
    if tag == b"s":
        text, pos = read_str(data, pos)
        return int(text), pos
    if tag == b"d":
        return _F64.unpack_from(data, pos)[0], pos + 8
    if tag == b"D":
        text, pos = read_str(data, pos)
        return decimal.Decimal(text), pos
    if tag == b"T":
        secs = _I64.unpack_from(data, pos)[0]
        return _EPOCH + datetime.timedelta(seconds=secs), pos + 8
    if tag == b"A":
        (n,) = _U32.unpack_from(data, pos)
        pos += 4
        items: list[Any] = []
        for _ in range(n):
            item, pos = decode_value(data, pos)
            items.append(item)
        return items, pos
    raise CodecError(f"unknown value tag {tag!r}")
