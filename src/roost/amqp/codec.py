"""Sans-IO AMQP 0-9-1 framing, field tables, content properties and hot-path encoders.

Bytes go in through ``FrameReader.feed``; ``next_frame`` returns one frame or ``NEED_DATA``.
Only malformed input raises, always a ``FrameError`` carrying RabbitMQ's reply code.
Method classes live in the generated ``codec_methods``.

What RabbitMQ 3.10.8 answers (probed with raw frames after a normal handshake; the
"who" column says which layer of Roost must produce the same answer):

=============================================  ===================================  ========
input                                          RabbitMQ 3.10 reply                  who
=============================================  ===================================  ========
frame-end octet is not 0xCE                    501 FRAME_ERROR                      codec
frame payload > frame_max (see note 1)         501 FRAME_ERROR                      codec
unknown frame type (0, 4, 7...)                501 FRAME_ERROR                      codec
heartbeat with a payload                       501 FRAME_ERROR                      codec
heartbeat on channel != 0                      505 UNEXPECTED_FRAME                 codec
header or body frame on channel 0              505 UNEXPECTED_FRAME                 codec
method payload shorter than 4 bytes            501 FRAME_ERROR                      codec
unknown class or method id (60/999, 99/10)     TCP close, no reply (see note 2)     codec
truncated or overlong method arguments         501 FRAME_ERROR (+ class/method ids) codec
truncated field table in arguments             501 FRAME_ERROR (+ class/method ids) codec
unknown field-table type tag ('Z', 'U')        TCP close, no reply (see note 2)     codec
invalid UTF-8 in a shortstr (queue.declare)    501 FRAME_ERROR                      codec
invalid UTF-8 in a table key or 'S' value      accepted                             codec
header payload shorter than 12 bytes           501 FRAME_ERROR                      codec
header class != 60 after basic.publish         505 UNEXPECTED_FRAME (60/40)         codec
header weight != 0                             505 UNEXPECTED_FRAME (60/40)         codec
malformed property list (truncated, trailing   accepted, then 541 INTERNAL_ERROR    see
bytes, continuation flag set)                  when the message is read (note 3)    note 3
body frame with no content expected            505 UNEXPECTED_FRAME                 channel
header frame with no content expected          505 UNEXPECTED_FRAME                 channel
method frame while a header is expected        505 UNEXPECTED_FRAME (60/40)         channel
method frame while body is expected            505 UNEXPECTED_FRAME (60/40)         channel
body longer than the header's body_size        505 UNEXPECTED_FRAME                 channel
method on a channel that is not open           504 CHANNEL_ERROR (class/method ids) conn.
channel-class method on channel 0              504 CHANNEL_ERROR                    conn.
connection-class method on channel 1           503 COMMAND_INVALID (10/50)          conn.
=============================================  ===================================  ========

Notes:

1. RabbitMQ accepts payloads of up to ``frame_max`` bytes, i.e. whole frames up to
   ``frame_max + 8``, although the spec counts the 8 bytes of framing in frame_max (its
   reader adds a "fudge" of one empty frame for clients that miscount). Roost is as
   lenient: a payload above ``frame_max`` is rejected, one of exactly ``frame_max`` is not.
2. RabbitMQ's reader crashes and drops the socket. Roost answers with a proper close
   instead: 503 COMMAND_INVALID for an unknown method (RabbitMQ's code for methods it
   refuses, e.g. "unimplemented method") and 502 SYNTAX_ERROR for a bad type tag.
3. RabbitMQ decodes properties lazily and crashes with 541 on the first read. The codec
   keeps ``HeaderFrame.properties`` raw and validates only class, weight and size; it is
   ``decode_properties`` that raises, with 501 FRAME_ERROR (like any undecodable argument).

Other choices: shortstrs decode to ``str`` and invalid UTF-8 is 501 (RabbitMQ's answer
above); table keys decode with ``surrogateescape`` so keys RabbitMQ accepts round-trip.
``longstr`` method arguments (mechanisms, locales, response, challenge, new_secret,
channel_id) decode to ``bytes``.
"""

from __future__ import annotations

import datetime
import decimal
import operator
import struct
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from roost.amqp.errors import FrameError
from roost.amqp.longint import Long as Long  # re-exported: handlers.py imports it here

if TYPE_CHECKING:
    from roost.amqp.codec_methods import Method

PROTOCOL_HEADER: Final = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD: Final = 1
FRAME_HEADER: Final = 2
FRAME_BODY: Final = 3
FRAME_HEARTBEAT: Final = 8
FRAME_END: Final = 0xCE

BASIC_CLASS_ID: Final = 60
FRAME_OVERHEAD: Final = 8  # type octet + channel short + size long + frame-end octet

# reply codes used here (the generated module has them all; it imports this one)
_FRAME_ERROR = 501
_SYNTAX_ERROR = 502
_UNEXPECTED_FRAME = 505


class _NeedData:
    """The type of ``NEED_DATA``: more bytes are needed before the next frame."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()

# -- struct formats ---------------------------------------------------------------------

_FRAME_HEAD = struct.Struct(">BHI")
_HEADER_FIELDS = struct.Struct(">HHQ")
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
# frame-end of the previous frame + the next frame's head (+ header-frame fields)
_END_HEADER_FRAME = struct.Struct(">BBHIHHQ")
_END_BODY_HEAD = struct.Struct(">BBHI")
_DELIVER_HEAD = struct.Struct(">BHIHH")  # method frame head + class and method ids
_DELIVER_TAIL = struct.Struct(">QB")
_GET_OK_COUNT = struct.Struct(">I")
_END = b"\xce"


# -- frames -----------------------------------------------------------------------------


class ProtocolHeader:
    """The first 8 bytes the peer sent, verbatim; valid iff ``raw == PROTOCOL_HEADER``."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        return type(other) is ProtocolHeader and other.raw == self.raw

    def __repr__(self) -> str:
        return f"ProtocolHeader({self.raw!r})"


class MethodFrame:
    __slots__ = ("channel", "method")

    def __init__(self, channel: int, method: Method) -> None:
        self.channel = channel
        self.method = method

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is MethodFrame
            and other.channel == self.channel
            and other.method == self.method
        )

    def __repr__(self) -> str:
        return f"MethodFrame({self.channel}, {self.method!r})"


class HeaderFrame:
    """A content header; ``properties`` is the raw flags + property list, not decoded."""

    __slots__ = ("body_size", "channel", "class_id", "properties")

    def __init__(self, channel: int, class_id: int, body_size: int, properties: bytes) -> None:
        self.channel = channel
        self.class_id = class_id
        self.body_size = body_size
        self.properties = properties

    def __eq__(self, other: object) -> bool:
        return type(other) is HeaderFrame and (
            other.channel,
            other.class_id,
            other.body_size,
            other.properties,
        ) == (self.channel, self.class_id, self.body_size, self.properties)

    def __repr__(self) -> str:
        return (
            f"HeaderFrame({self.channel}, class_id={self.class_id}, "
            f"body_size={self.body_size}, properties={self.properties!r})"
        )


class BodyFrame:
    __slots__ = ("channel", "payload")

    def __init__(self, channel: int, payload: bytes) -> None:
        self.channel = channel
        self.payload = payload

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is BodyFrame
            and other.channel == self.channel
            and other.payload == self.payload
        )

    def __repr__(self) -> str:
        return f"BodyFrame({self.channel}, {self.payload[:32]!r}, size={len(self.payload)})"


class HeartbeatFrame:
    __slots__ = ("channel",)

    def __init__(self, channel: int = 0) -> None:
        self.channel = channel

    def __eq__(self, other: object) -> bool:
        return type(other) is HeartbeatFrame and other.channel == self.channel

    def __repr__(self) -> str:
        return f"HeartbeatFrame({self.channel})"


Frame = ProtocolHeader | MethodFrame | HeaderFrame | BodyFrame | HeartbeatFrame


# -- reading ----------------------------------------------------------------------------

_COMPACT_AT = 65536  # bytes consumed before the buffer is compacted


class FrameReader:
    """Incremental frame parser: ``feed`` bytes, then ``next_frame`` until ``NEED_DATA``.

    The buffer is one bytearray with a read position; consumed bytes are dropped lazily
    in ``feed`` (when all were read, or once more than 64 KiB were), so a buffer holding
    hundreds of frames costs no copying per frame. Body payloads are copied to ``bytes``
    once, through a memoryview; method payloads are decoded from a small bytearray slice.

    ``frame_max`` may be changed after connection.tune-ok; 0 means no limit (spec).
    """

    __slots__ = (
        "_buf",
        "_decode_method",
        "_header_pending",
        "_last_header",
        "_last_header_payload",
        "_last_publish",
        "_last_publish_payload",
        "_pos",
        "_view",
        "frame_max",
    )

    def __init__(self, *, frame_max: int = 131072, expect_protocol_header: bool = True) -> None:
        # Imported here: the generated module imports this one at module level.
        from roost.amqp.codec_methods import decode_method

        self.frame_max = frame_max
        self._buf = bytearray()
        self._pos = 0
        self._view: memoryview | None = None
        self._header_pending = expect_protocol_header
        self._decode_method = decode_method
        # The last basic.publish payload and its decoded method: publishers repeat the same
        # exchange and routing key, and reusing the (never mutated) method object saves
        # ~10% of the broker's time in bench scenario 1.
        self._last_publish_payload = bytearray()
        self._last_publish: Any = None
        # Likewise the last content header (same channel, size and properties).
        self._last_header_payload = bytearray()
        self._last_header: HeaderFrame | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._view is not None:
            self._view.release()
            self._view = None
        buf, pos = self._buf, self._pos
        try:
            if pos and (pos == len(buf) or pos > _COMPACT_AT):
                del buf[:pos]
                self._pos = 0
            buf += data
        except BufferError:
            # A caller still holds a slice of the old buffer (e.g. in a traceback):
            # move to a fresh buffer rather than fail.
            self._buf = bytearray(buf[pos:]) + data
            self._pos = 0

    def _viewed(self) -> memoryview:
        """A view of the buffer, kept until the next feed (which releases it to resize)."""
        view = self._view
        if view is None:
            view = self._view = memoryview(self._buf)
        return view

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def frames(self) -> list[Frame]:
        """Every complete frame in the buffer, in order (``[]`` when none is complete).

        At the first malformed frame it raises ``FrameError`` at once: the complete frames
        before it were consumed and are dropped with the call (the connection is about to
        close anyway). A caller that must act on them first loops over ``next_frame``.
        """
        out: list[Frame] = []
        next_frame = self.next_frame
        while (frame := next_frame()) is not NEED_DATA:
            out.append(frame)  # type: ignore[arg-type]
        return out

    def next_frame(self) -> Frame | _NeedData:
        # Hand-tuned: this runs three times per published message and was the largest
        # single cost in bench scenario 3 (18% of the broker). Frame types are literals
        # (1 method, 2 header, 3 body, 8 heartbeat) to spare global lookups, and the
        # type check is folded into the dispatch below.
        buf = self._buf
        pos = self._pos
        if self._header_pending:
            return self._protocol_header()
        if len(buf) - pos < 7:
            return NEED_DATA
        kind, channel, size = _FRAME_HEAD.unpack_from(buf, pos)
        if size > self.frame_max > 0:
            raise _frame_too_large(kind, size, self.frame_max)
        start = pos + 7
        end = start + size
        if end >= len(buf):
            if kind not in _KNOWN_FRAME_TYPES:
                raise FrameError(_FRAME_ERROR, f"FRAME_ERROR - unknown frame type {kind}")
            return NEED_DATA
        if buf[end] != 206:  # FRAME_END
            if kind not in _KNOWN_FRAME_TYPES:
                raise FrameError(_FRAME_ERROR, f"FRAME_ERROR - unknown frame type {kind}")
            raise FrameError(
                _FRAME_ERROR,
                f"FRAME_ERROR - frame_end octet missing (found 0x{buf[end]:02X}) "
                f"in a type {kind} frame on channel {channel}",
            )
        if kind == 1:
            if size < 4:
                raise FrameError(_FRAME_ERROR, f"FRAME_ERROR - method frame of {size} bytes")
            # A bytearray slice (one small copy) is cheaper than a memoryview slice, and
            # its strings decode faster (measured on 3.11); no view outlives the call.
            payload = buf[start:end]
            if payload == self._last_publish_payload:
                method = self._last_publish
            else:
                method = self._decode_method(payload)
                if method.INDEX == _BASIC_PUBLISH_INDEX:
                    self._last_publish_payload = payload
                    self._last_publish = method
            frame: Frame = MethodFrame(channel, method)
        elif kind == 3:
            if channel == 0:
                raise _content_on_channel_zero(kind)
            frame = BodyFrame(channel, self._viewed()[start:end].tobytes())  # its one copy
        elif kind == 2:
            payload = buf[start:end]
            last = self._last_header
            if (
                last is not None
                and last.channel == channel
                and payload == self._last_header_payload
            ):
                frame = last
            else:
                frame = self._last_header = _header_frame(channel, self._viewed(), start, end)
                self._last_header_payload = payload
        elif kind == 8:
            frame = _heartbeat_frame(channel, size)
        else:
            raise FrameError(_FRAME_ERROR, f"FRAME_ERROR - unknown frame type {kind}")
        self._pos = end + 1
        return frame

    def _protocol_header(self) -> ProtocolHeader | _NeedData:
        pos = self._pos
        if len(self._buf) - pos < 8:
            return NEED_DATA
        self._header_pending = False
        self._pos = pos + 8
        return ProtocolHeader(bytes(self._buf[pos : pos + 8]))


_BASIC_PUBLISH_INDEX = 60 << 16 | 40
_KNOWN_FRAME_TYPES = frozenset((FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT))


def _frame_too_large(kind: int, size: int, frame_max: int) -> FrameError:
    return FrameError(
        _FRAME_ERROR,
        f"FRAME_ERROR - type {kind} frame payload of {size} bytes is larger than "
        f"frame_max {frame_max}",
    )


def _content_on_channel_zero(kind: int) -> FrameError:
    return FrameError(_UNEXPECTED_FRAME, f"UNEXPECTED_FRAME - type {kind} frame on channel 0")


def _header_frame(channel: int, view: memoryview, start: int, end: int) -> HeaderFrame:
    if channel == 0:
        raise _content_on_channel_zero(FRAME_HEADER)
    if end - start < 14:  # class, weight, body size, property flags
        raise FrameError(
            _FRAME_ERROR, f"FRAME_ERROR - content header frame of {end - start} bytes"
        )
    class_id, weight, body_size = _HEADER_FIELDS.unpack_from(view, start)
    if class_id != BASIC_CLASS_ID:
        raise FrameError(
            _UNEXPECTED_FRAME,
            f"UNEXPECTED_FRAME - expected content header for class {BASIC_CLASS_ID}, "
            f"got one for class {class_id} instead",
        )
    if weight != 0:
        raise FrameError(
            _UNEXPECTED_FRAME, f"UNEXPECTED_FRAME - content header weight {weight}, expected 0"
        )
    return HeaderFrame(channel, class_id, body_size, view[start + 12 : end].tobytes())


def _heartbeat_frame(channel: int, size: int) -> HeartbeatFrame:
    if size:
        raise FrameError(_FRAME_ERROR, f"FRAME_ERROR - heartbeat frame with a {size}-byte payload")
    if channel:
        raise FrameError(
            _UNEXPECTED_FRAME, f"UNEXPECTED_FRAME - heartbeat frame on channel {channel}"
        )
    return _HEARTBEAT


_HEARTBEAT = HeartbeatFrame(0)


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
    for key, value in table.items():
        try:
            parts.append(encode_shortstr(key))
        except UnicodeEncodeError:  # a key decoded from invalid UTF-8: give back its bytes
            raw = key.encode("utf-8", "surrogateescape")
            if len(raw) > 255:
                raise ValueError(f"field table key longer than 255 bytes: {key[:40]!r}") from None
            parts.append(_UINT8.pack(len(raw)) + raw)
        encoder = encoders.get(type(value))  # encode_value's exact-type fast path, inlined
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


# -- hot-path encoders ------------------------------------------------------------------


def encode_method_frame(channel: int, method: Method) -> bytes:
    payload = method.encode()
    return _FRAME_HEAD.pack(FRAME_METHOD, channel, len(payload)) + payload + _END


_HEARTBEAT_BYTES: Final = _FRAME_HEAD.pack(FRAME_HEARTBEAT, 0, 0) + _END


def encode_heartbeat() -> bytes:
    return _HEARTBEAT_BYTES


def encode_content(
    channel: int, class_id: int, properties: bytes, body: bytes, frame_max: int
) -> bytes:
    """Header frame + body frames (split at frame_max - 8; none for an empty body)."""
    header = _FRAME_HEAD.pack(FRAME_HEADER, channel, 12 + len(properties))
    header += _HEADER_FIELDS.pack(class_id, 0, len(body))
    return b"".join(_content_parts(header, channel, properties, body, frame_max))


def _with_content(
    channel: int, method: bytes, properties: bytes, body: bytes, frame_max: int
) -> bytes:
    """Method frame for ``method`` (a payload) + header frame + body frames, in one bytes."""
    size = len(body)
    head = _FRAME_HEAD.pack(FRAME_METHOD, channel, len(method))
    header = _END_HEADER_FRAME.pack(
        FRAME_END, FRAME_HEADER, channel, 12 + len(properties), BASIC_CLASS_ID, 0, size
    )
    if 0 < size <= frame_max - FRAME_OVERHEAD or (size and not frame_max):
        # the common case: one body frame
        body_head = _END_BODY_HEAD.pack(FRAME_END, FRAME_BODY, channel, size)
        return b"".join((head, method, header, properties, body_head, body, _END))
    return b"".join((head, method, *_content_parts(header, channel, properties, body, frame_max)))


def _content_parts(
    header: bytes, channel: int, properties: bytes, body: bytes, frame_max: int
) -> list[bytes]:
    """``header`` (already packed) + properties + the body split into frames."""
    parts = [header, properties]
    size = len(body)
    if frame_max and frame_max <= FRAME_OVERHEAD:
        raise ValueError(f"frame_max {frame_max} leaves no room for a body")
    chunk = frame_max - FRAME_OVERHEAD if frame_max else max(size, 1)
    view = memoryview(body)
    for start in range(0, size, chunk):
        piece = view[start : start + chunk]
        parts.append(_END_BODY_HEAD.pack(FRAME_END, FRAME_BODY, channel, len(piece)))
        parts.append(piece)  # type: ignore[arg-type]  # join takes any buffer
    parts.append(_END)
    return parts


def encode_basic_deliver(
    channel: int,
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.deliver method + header + body frames: the broker's hottest encoder."""
    size = len(body)
    if 0 < size <= frame_max - FRAME_OVERHEAD:
        # Hand-tuned common case (one body frame): one join and three packs for all
        # three frames, instead of building the method payload first (1.54 -> 1.16 us
        # per delivery in a micro-benchmark; ~13% of the broker in bench scenario 1).
        tag = encode_shortstr(consumer_tag)
        ex = encode_shortstr(exchange)
        rk = encode_shortstr(routing_key)
        return b"".join(
            (
                _DELIVER_HEAD.pack(
                    FRAME_METHOD, channel, 13 + len(tag) + len(ex) + len(rk), 60, 60
                ),
                tag,
                _DELIVER_TAIL.pack(delivery_tag, 1 if redelivered else 0),
                ex,
                rk,
                _END_HEADER_FRAME.pack(
                    FRAME_END, FRAME_HEADER, channel, 12 + len(properties), BASIC_CLASS_ID, 0,
                    size,
                ),
                properties,
                _END_BODY_HEAD.pack(FRAME_END, FRAME_BODY, channel, size),
                body,
                _END,
            )
        )
    method = b"".join(
        (
            b"\x00\x3c\x00\x3c",
            encode_shortstr(consumer_tag),
            _DELIVER_TAIL.pack(delivery_tag, 1 if redelivered else 0),
            encode_shortstr(exchange),
            encode_shortstr(routing_key),
        )
    )
    return _with_content(channel, method, properties, body, frame_max)


def encode_basic_publish(
    channel: int,
    exchange: str,
    routing_key: str,
    mandatory: bool,
    immediate: bool,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.publish (ticket 0) method + header + body frames, for clients."""
    bits = (1 if mandatory else 0) | (2 if immediate else 0)
    method = b"".join(
        (
            b"\x00\x3c\x00\x28\x00\x00",
            encode_shortstr(exchange),
            encode_shortstr(routing_key),
            _UINT8.pack(bits),
        )
    )
    return _with_content(channel, method, properties, body, frame_max)


def encode_basic_get_ok(
    channel: int,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
    message_count: int,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.get-ok method + header + body frames."""
    method = b"".join(
        (
            b"\x00\x3c\x00\x47",
            _DELIVER_TAIL.pack(delivery_tag, 1 if redelivered else 0),
            encode_shortstr(exchange),
            encode_shortstr(routing_key),
            _GET_OK_COUNT.pack(message_count),
        )
    )
    return _with_content(channel, method, properties, body, frame_max)


def encode_basic_return(
    channel: int,
    reply_code: int,
    reply_text: str,
    exchange: str,
    routing_key: str,
    properties: bytes,
    body: bytes,
    frame_max: int,
) -> bytes:
    """basic.return method + header + body frames."""
    method = b"".join(
        (
            b"\x00\x3c\x00\x32",
            _UINT16.pack(reply_code),
            encode_shortstr(reply_text),
            encode_shortstr(exchange),
            encode_shortstr(routing_key),
        )
    )
    return _with_content(channel, method, properties, body, frame_max)
