"""AMQP 0-9-1 field values (sans-IO, stdlib only): field tables and arrays read and
written, and short and long strings. ``roost.amqp.codec`` re-exports every public name;
codec.py's table says what malformed input answers."""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable, Mapping
from typing import Any

from roost.amqp.errors import FrameError
from roost.amqp.frames import (
    _FRAME_ERROR,
    _SYNTAX_ERROR,
)
from roost.amqp.longint import Long

_UINT8 = struct.Struct(">B")
_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_UINT64 = struct.Struct(">Q")
_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")
_DECIMAL = struct.Struct(">Bi")


# -- field values -----------------------------------------------------------------------
# A table is copied to ``bytes`` once (tables are small) so that strings decode with
# bytes.decode, much faster than str(memoryview). Readers take (data, offset just after
# the type tag) and return (value, new offset); they may read past the end of a nested
# table or array as long as they stay inside ``data``: the caller checks the position
# against the container's end after every value, and reading past ``data`` raises
# IndexError/struct.error, which decode_table/decode_array turn into FrameError 501.

Reader = Callable[[bytes, int], tuple[Any, int]]


def _fixed(fmt: struct.Struct) -> Reader:
    unpack_from, size = fmt.unpack_from, fmt.size

    def read(data: bytes, offset: int) -> tuple[Any, int]:
        return unpack_from(data, offset)[0], offset + size

    return read


def _read_bool(data: bytes, offset: int) -> tuple[bool, int]:
    return data[offset] != 0, offset + 1


def _read_longstr(data: bytes, offset: int) -> tuple[str | bytes, int]:
    end = offset + 4 + _UINT32.unpack_from(data, offset)[0]
    raw = data[offset + 4 : end]
    try:
        return raw.decode(), end
    except UnicodeDecodeError:  # 'S' is binary-safe; RabbitMQ passes such values through
        return raw, end


def _read_bytes(data: bytes, offset: int) -> tuple[bytes, int]:
    end = offset + 4 + _UINT32.unpack_from(data, offset)[0]
    return data[offset + 4 : end], end


def _read_decimal(data: bytes, offset: int) -> tuple[decimal.Decimal, int]:
    scale, mantissa = _DECIMAL.unpack_from(data, offset)
    return decimal.Decimal(mantissa).scaleb(-scale), offset + 5


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MAX_TIMESTAMP = 253402300799  # 9999-12-31T23:59:59Z, the last second datetime can hold


def _read_timestamp(data: bytes, offset: int) -> tuple[datetime.datetime | int, int]:
    (seconds,) = _UINT64.unpack_from(data, offset)
    if seconds > _MAX_TIMESTAMP:  # e.g. milliseconds sent by a confused client: keep it
        return seconds, offset + 8
    return _EPOCH + datetime.timedelta(seconds=seconds), offset + 8


def _read_void(data: bytes, offset: int) -> tuple[None, int]:
    return None, offset


def _read_table(data: bytes, offset: int) -> tuple[dict[str, Any], int]:
    start = offset + 4
    end = start + _UINT32.unpack_from(data, offset)[0]
    return _table_items(data, start, end), end


def _read_array(data: bytes, offset: int) -> tuple[list[Any], int]:
    start = offset + 4
    end = start + _UINT32.unpack_from(data, offset)[0]
    return _array_items(data, start, end), end


_READERS: dict[int, Reader] = {
    ord("t"): _read_bool,
    ord("b"): _fixed(_INT8),
    ord("B"): _fixed(_UINT8),
    ord("s"): _fixed(_INT16),  # RabbitMQ's meaning (the 0-9-1 errata), not the spec's
    ord("u"): _fixed(_UINT16),
    ord("I"): _fixed(_INT32),
    ord("i"): _fixed(_UINT32),
    ord("l"): _fixed(_INT64),
    ord("L"): _fixed(_INT64),  # not in RabbitMQ's list but accepted by it; pamqp reads int64
    ord("f"): _fixed(_FLOAT),
    ord("d"): _fixed(_DOUBLE),
    ord("D"): _read_decimal,
    ord("S"): _read_longstr,
    ord("x"): _read_bytes,
    ord("A"): _read_array,
    ord("T"): _read_timestamp,
    ord("F"): _read_table,
    ord("V"): _read_void,
}
_TAG_S, _TAG_I = ord("S"), ord("I")


def _read_value(data: bytes, offset: int) -> tuple[Any, int]:
    tag = data[offset]
    if tag == _TAG_S:  # the two commonest types, inlined
        return _read_longstr(data, offset + 1)
    if tag == _TAG_I:
        return _INT32.unpack_from(data, offset + 1)[0], offset + 5
    reader = _READERS.get(tag)
    if reader is None:
        raise FrameError(
            _SYNTAX_ERROR, f"SYNTAX_ERROR - unknown field value type {chr(tag)!r} (0x{tag:02X})"
        )
    return reader(data, offset + 1)


def _table_items(data: bytes, offset: int, end: int) -> dict[str, Any]:
    table: dict[str, Any] = {}
    while offset < end:
        key_end = offset + 1 + data[offset]
        key = data[offset + 1 : key_end].decode("utf-8", "surrogateescape")
        table[key], offset = _read_value(data, key_end)
        if offset > end:
            raise IndexError("field value runs past its table")
    return table


def _array_items(data: bytes, offset: int, end: int) -> list[Any]:
    items: list[Any] = []
    while offset < end:
        value, offset = _read_value(data, offset)
        if offset > end:
            raise IndexError("field value runs past its array")
        items.append(value)
    return items


def _container(buf: memoryview | bytes | bytearray, offset: int, what: str) -> tuple[bytes, int]:
    """The body of the length-prefixed table/array at ``offset`` as bytes, and its end."""
    try:
        (size,) = _UINT32.unpack_from(buf, offset)
    except struct.error:
        raise _truncated(what) from None
    start = offset + 4
    end = start + size
    if end > len(buf):
        raise _truncated(what)
    return bytes(buf[start:end]), end


def _truncated(what: str) -> FrameError:
    return FrameError(_FRAME_ERROR, f"FRAME_ERROR - truncated {what}")


def decode_table(buf: memoryview | bytes | bytearray, offset: int) -> tuple[dict[str, Any], int]:
    """Decode the field table at ``offset`` (length prefix included): (table, new offset)."""
    data, end = _container(buf, offset, "field table")
    try:
        return _table_items(data, 0, len(data)), end
    except (IndexError, struct.error):
        raise _truncated("field table") from None


def decode_array(buf: memoryview | bytes | bytearray, offset: int) -> tuple[list[Any], int]:
    """Decode the field array at ``offset`` (length prefix included): (list, new offset)."""
    data, end = _container(buf, offset, "field array")
    try:
        return _array_items(data, 0, len(data)), end
    except (IndexError, struct.error):
        raise _truncated("field array") from None


# -- encoding field values --------------------------------------------------------------

_TAGGED_INT32 = struct.Struct(">Bi")
_TAGGED_INT64 = struct.Struct(">Bq")
_TAGGED_SIZE = struct.Struct(">BI")
_TAGGED_DOUBLE = struct.Struct(">Bd")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _encode_int(value: int) -> bytes:
    if _INT32_MIN <= value <= _INT32_MAX:
        return _TAGGED_INT32.pack(0x49, value)  # 'I'
    if _INT64_MIN <= value <= _INT64_MAX:
        return _TAGGED_INT64.pack(0x6C, value)  # 'l'
    raise ValueError(f"integer {value} does not fit a signed 64-bit field value")


def _encode_long(value: int) -> bytes:
    return _TAGGED_INT64.pack(0x6C, value)


def _encode_str(value: str) -> bytes:
    raw = value.encode()
    return _TAGGED_SIZE.pack(0x53, len(raw)) + raw  # 'S'


def _encode_bytes(value: bytes | bytearray | memoryview) -> bytes:
    return _TAGGED_SIZE.pack(0x78, len(value)) + bytes(value)  # 'x'


def _encode_decimal(value: decimal.Decimal) -> bytes:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        raise ValueError(f"cannot encode {value} as a field value")
    if exponent > 0:  # 12E+3: fold the exponent into the mantissa
        scale, mantissa = 0, int(value)
    else:
        scale, mantissa = -exponent, int(value.scaleb(-exponent))
    if scale > 255 or not _INT32_MIN <= mantissa <= _INT32_MAX:
        raise ValueError(f"decimal {value} needs scale <= 255 and a 32-bit mantissa")
    return b"D" + _DECIMAL.pack(scale, mantissa)


def _encode_datetime(value: datetime.datetime) -> bytes:
    if value.tzinfo is None:  # naive: taken as UTC, as pamqp and pika do
        value = value.replace(tzinfo=datetime.UTC)
    return b"T" + _UINT64.pack(int(value.timestamp()))


def _encode_float(value: float) -> bytes:
    return _TAGGED_DOUBLE.pack(0x64, value)  # 'd'


def _encode_bool(value: bool) -> bytes:
    return b"t\x01" if value else b"t\x00"


def _encode_none(value: None) -> bytes:
    return b"V"


def _encode_table_value(value: Mapping[str, Any]) -> bytes:
    return b"F" + encode_table(value)


def _encode_array_value(value: list[Any] | tuple[Any, ...]) -> bytes:
    return b"A" + encode_array(value)


# Exact-type dispatch first (fast); subclasses fall back to the isinstance chain.
_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    str: _encode_str,
    bool: _encode_bool,
    int: _encode_int,
    Long: _encode_long,
    float: _encode_float,
    bytes: _encode_bytes,
    bytearray: _encode_bytes,
    memoryview: _encode_bytes,
    dict: _encode_table_value,
    list: _encode_array_value,
    tuple: _encode_array_value,
    decimal.Decimal: _encode_decimal,
    datetime.datetime: _encode_datetime,
    type(None): _encode_none,
}


def encode_value(value: Any) -> bytes:
    """One field value: type tag + value."""
    encoder = _ENCODERS.get(type(value))
    if encoder is not None:
        return encoder(value)
    for kind, encoder in _ENCODERS.items():  # subclasses (IntEnum, OrderedDict, ...)
        if isinstance(value, kind):
            return encoder(value)
    if isinstance(value, Mapping):
        return _encode_table_value(value)
    raise TypeError(f"cannot encode {type(value).__name__} as an AMQP field value")


def encode_table(table: Mapping[str, Any]) -> bytes:
    """Encode a field table, 4-byte length prefix included; keys in insertion order."""
    parts: list[bytes] = []
    encoders = _ENCODERS
    cache = _SHORTSTR_CACHE
    for key, value in table.items():
        # the key and an int value inline: a stream delivery's headers (x-stream-offset,
        # x-stream-timestamp, the producer's ints) are encoded once per row read
        cached = cache.get(key)
        if cached is not None:
            parts.append(cached)
        else:
            try:
                parts.append(encode_shortstr(key))
            except UnicodeEncodeError:  # a key decoded from invalid UTF-8: its bytes
                raw = key.encode("utf-8", "surrogateescape")
                if len(raw) > 255:
                    raise ValueError(
                        f"field table key longer than 255 bytes: {key[:40]!r}"
                    ) from None
                parts.append(_UINT8.pack(len(raw)) + raw)
        kind = type(value)
        if kind is int and _INT32_MIN <= value <= _INT64_MAX:
            parts.append(
                _TAGGED_INT32.pack(0x49, value)
                if value <= _INT32_MAX
                else _TAGGED_INT64.pack(0x6C, value)
            )
            continue
        encoder = encoders.get(kind)  # encode_value's exact-type fast path, inlined
        parts.append(encoder(value) if encoder is not None else encode_value(value))
    body = b"".join(parts)
    return _UINT32.pack(len(body)) + body


def encode_array(items: list[Any] | tuple[Any, ...]) -> bytes:
    """Encode a field array, 4-byte length prefix included."""
    body = b"".join([encode_value(item) for item in items])
    return _UINT32.pack(len(body)) + body


# -- short strings ----------------------------------------------------------------------

_SHORTSTR_CACHE: dict[str, bytes] = {}
_SHORTSTR_CACHE_MAX = 4096


def encode_shortstr(value: str) -> bytes:
    """Length octet + UTF-8. Cached: exchanges, routing keys and consumer tags repeat."""
    cached = _SHORTSTR_CACHE.get(value)
    if cached is not None:
        return cached
    raw = value.encode()
    if len(raw) > 255:
        raise ValueError(f"shortstr longer than 255 bytes: {value[:40]!r}...")
    encoded = _UINT8.pack(len(raw)) + raw
    if len(_SHORTSTR_CACHE) >= _SHORTSTR_CACHE_MAX:
        _SHORTSTR_CACHE.clear()  # unbounded key spaces (reply queues) must not grow it
    _SHORTSTR_CACHE[value] = encoded
    return encoded


def encode_longstr(value: bytes | bytearray | memoryview | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else bytes(value)
    return _UINT32.pack(len(raw)) + raw
