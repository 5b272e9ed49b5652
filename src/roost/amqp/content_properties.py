"""The content properties of basic (sans-IO, stdlib only): the 14 properties' flags and
values decoded from and encoded to a content header's property bytes.
``roost.amqp.codec`` re-exports every public name."""

from __future__ import annotations

import datetime
import operator
import struct
from typing import Any, Final

from roost.amqp.errors import FrameError
from roost.amqp.field_table import (
    _UINT8,
    _UINT16,
    _UINT64,
    _encode_datetime,
    decode_table,
    encode_shortstr,
    encode_table,
)
from roost.amqp.frames import (
    _FRAME_ERROR,
)

# -- content properties -----------------------------------------------------------------
# basic's 14 properties in spec order: (attribute, kind). Flag bit 15 is the first one.
# Kept here by hand because the generated module imports this one; a test checks it
# against the spec's list in codec_methods.BasicProperties.

PROPERTY_FIELDS: Final = (
    ("content_type", "shortstr"),
    ("content_encoding", "shortstr"),
    ("headers", "table"),
    ("delivery_mode", "octet"),
    ("priority", "octet"),
    ("correlation_id", "shortstr"),
    ("reply_to", "shortstr"),
    ("expiration", "shortstr"),
    ("message_id", "shortstr"),
    ("timestamp", "timestamp"),
    ("type", "shortstr"),
    ("user_id", "shortstr"),
    ("app_id", "shortstr"),
    ("cluster_id", "shortstr"),
)
_PROPERTY_MASKS = tuple(1 << (15 - index) for index in range(len(PROPERTY_FIELDS)))
_PROPERTY_PLAN = tuple(
    (index, mask, kind)
    for index, (mask, (_, kind)) in enumerate(zip(_PROPERTY_MASKS, PROPERTY_FIELDS, strict=True))
)
_CONTINUATION = 0x0001  # a second flags word follows: never used by basic's 14 properties
_ALL_PROPERTIES = sum(_PROPERTY_MASKS)
_NO_PROPERTIES: Final = (None,) * len(PROPERTY_FIELDS)


def decode_properties(raw: bytes | memoryview) -> tuple[Any, ...]:
    """The 14 basic properties in spec order, None where absent.

    ``timestamp`` is an int (seconds), ``headers`` a dict. Malformed input raises
    ``FrameError`` 501.
    """
    try:
        return _decode_properties(raw)
    except (IndexError, struct.error):
        raise FrameError(_FRAME_ERROR, "FRAME_ERROR - truncated content properties") from None
    except UnicodeDecodeError:
        raise FrameError(_FRAME_ERROR, "FRAME_ERROR - Malformed UTF-8 in shortstr") from None


def _decode_properties(raw: bytes | memoryview) -> tuple[Any, ...]:
    if type(raw) is memoryview:  # slices of bytes decode faster than str(memoryview)
        raw = raw.tobytes()
    flags = raw[0] << 8 | raw[1]
    if flags & _CONTINUATION:
        raise FrameError(_FRAME_ERROR, "FRAME_ERROR - property flags continuation is not used")
    if not flags & _ALL_PROPERTIES:  # bit 1 is reserved: RabbitMQ ignores it, so do we
        if len(raw) != 2:
            raise _trailing_properties(len(raw) - 2)
        return _NO_PROPERTIES
    values: list[Any] = [None] * 14
    offset = 2
    for index, mask, kind in _PROPERTY_PLAN:
        if flags & mask:
            if kind == "shortstr":
                end = offset + 1 + raw[offset]
                values[index] = raw[offset + 1 : end].decode()
                offset = end
            elif kind == "octet":
                values[index] = raw[offset]
                offset += 1
            elif kind == "table":
                values[index], offset = decode_table(raw, offset)
            else:  # timestamp
                (values[index],) = _UINT64.unpack_from(raw, offset)
                offset += 8
        if not flags & (mask - 1):  # no property left after this one
            break
    if offset > len(raw):  # a shortstr cut short by the end of raw
        raise IndexError("property runs past the header frame")
    if offset < len(raw):
        raise _trailing_properties(len(raw) - offset)
    return tuple(values)


def _trailing_properties(count: int) -> FrameError:
    return FrameError(_FRAME_ERROR, f"FRAME_ERROR - {count} bytes after the content properties")


_GET_PROPERTIES = operator.attrgetter(*(name for name, _ in PROPERTY_FIELDS))
_PROPERTY_KINDS = tuple(kind for _, kind in PROPERTY_FIELDS)


def encode_properties(props: object) -> bytes:
    """Flags + property list from any object with the 14 property attributes."""
    values = _GET_PROPERTIES(props)  # one C call for the fourteen getattrs
    flags = 0
    parts: list[bytes] = [b""]
    index = -1
    for value in values:
        index += 1
        if value is None:
            continue
        flags |= 0x8000 >> index
        kind = _PROPERTY_KINDS[index]
        if kind == "shortstr":
            parts.append(encode_shortstr(value))
        elif kind == "octet":
            parts.append(_UINT8.pack(value))
        elif kind == "table":
            parts.append(encode_table(value))
        elif isinstance(value, datetime.datetime):
            parts.append(_encode_datetime(value)[1:])
        else:
            parts.append(_UINT64.pack(value))
    parts[0] = _UINT16.pack(flags)
    return b"".join(parts)
