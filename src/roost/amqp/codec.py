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

This module is the frame reader; the rest lives in its parts and is re-exported here:
frames.py (frame types, layout and classes), field_table.py (field values, short and
long strings), content_properties.py (basic's properties) and frame_encoders.py (the
hot-path encoders).
"""

from __future__ import annotations

from typing import Any, Final

from librt.strings import read_i16_be, read_i32_be

from roost.amqp.content_properties import (
    PROPERTY_FIELDS,
    decode_properties,
    encode_properties,
)
from roost.amqp.errors import FrameError
from roost.amqp.field_table import (
    Reader,
    decode_array,
    decode_table,
    encode_array,
    encode_longstr,
    encode_shortstr,
    encode_table,
    encode_value,
)
from roost.amqp.frame_encoders import (
    encode_basic_deliver,
    encode_basic_get_ok,
    encode_basic_publish,
    encode_basic_return,
    encode_content,
    encode_heartbeat,
    encode_method_frame,
)
from roost.amqp.frames import (
    _FRAME_ERROR,
    _FRAME_HEAD,
    _HEADER_FIELDS,
    _UNEXPECTED_FRAME,
    BASIC_CLASS_ID,
    FRAME_BODY,
    FRAME_END,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_OVERHEAD,
    NATIVE,
    NEED_DATA,
    PROTOCOL_HEADER,
    BodyFrame,
    Frame,
    HeaderFrame,
    HeartbeatFrame,
    MethodFrame,
    ProtocolHeader,
    _NeedData,
)
from roost.amqp.longint import Long

# the codec's names, wherever they live: every importer of roost.amqp.codec keeps working
__all__ = [
    "BASIC_CLASS_ID",
    "FRAME_BODY",
    "FRAME_END",
    "FRAME_HEADER",
    "FRAME_HEARTBEAT",
    "FRAME_METHOD",
    "FRAME_OVERHEAD",
    "NEED_DATA",
    "PROPERTY_FIELDS",
    "PROTOCOL_HEADER",
    "BodyFrame",
    "Frame",
    "FrameReader",
    "HeaderFrame",
    "HeartbeatFrame",
    "Long",
    "MethodFrame",
    "ProtocolHeader",
    "Reader",
    "decode_array",
    "decode_properties",
    "decode_table",
    "encode_array",
    "encode_basic_deliver",
    "encode_basic_get_ok",
    "encode_basic_publish",
    "encode_basic_return",
    "encode_content",
    "encode_heartbeat",
    "encode_longstr",
    "encode_method_frame",
    "encode_properties",
    "encode_shortstr",
    "encode_table",
    "encode_value",
]


# -- reading ----------------------------------------------------------------------------


class FrameReader:
    """Incremental frame parser: ``feed`` bytes, then ``next_frame`` until ``NEED_DATA``.

    The buffer is one ``bytes`` with a read position. ``feed`` replaces it by the unread
    tail plus the new bytes (the new bytes themselves when all was read), so each byte is
    copied about once, as appending to a bytearray did; a frame larger than 64 KiB that
    is still arriving collects its chunks in a list and joins them once, when complete.
    Reading ``bytes`` is what the compiled build does natively: indexing, slicing (a
    body's one copy), comparing, and librt's fixed-width reads, where a bytearray or a
    memoryview goes through Python's generic calls.

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
        "_need",
        "_pending",
        "_pending_size",
        "_pos",
        "frame_max",
    )

    def __init__(self, *, frame_max: int = 131072, expect_protocol_header: bool = True) -> None:
        # Imported here: the generated module imports this one at module level.
        from roost.amqp.codec_methods import decode_method

        self.frame_max = frame_max
        self._buf = b""
        self._pos = 0
        # the size of the incomplete frame at _pos, once its head is read (else 0), and
        # the chunks of a large one collected until it is whole
        self._need = 0
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._header_pending = expect_protocol_header
        self._decode_method = decode_method
        # The last basic.publish payload and its decoded method: publishers repeat the same
        # exchange and routing key, and reusing the (never mutated) method object saves
        # ~10% of the broker's time in bench scenario 1.
        self._last_publish_payload = b""
        self._last_publish: Any = None
        # Likewise the last content header (same channel, size and properties).
        self._last_header_payload = b""
        self._last_header: HeaderFrame | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        chunk = data if isinstance(data, bytes) else bytes(data)
        pending = self._pending
        if pending:
            pending.append(chunk)
            self._pending_size += len(chunk)
            if self._pending_size >= self._need:
                self._buf = b"".join(pending)
                self._pending = []
                self._pending_size = 0
            return
        buf, pos = self._buf, self._pos
        if pos == len(buf):
            self._buf = chunk
        elif self._need > _COLLECT_ABOVE and len(buf) - pos + len(chunk) < self._need:
            self._pending = [buf[pos:], chunk]  # a large frame: joined once, when whole
            self._pending_size = len(buf) - pos + len(chunk)
            self._buf = b""
        else:
            self._buf = buf[pos:] + chunk
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos + self._pending_size

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
        # typed: the compiled code then compares and adds machine ints, not objects
        kind: int
        channel: int
        size: int
        if NATIVE:  # inline C reads (93 -> 5 ns in a micro-benchmark)
            kind = buf[pos]
            channel = int(read_i16_be(buf, pos + 1)) & 0xFFFF
            size = int(read_i32_be(buf, pos + 3)) & 0xFFFF_FFFF
        else:
            kind, channel, size = _FRAME_HEAD.unpack_from(buf, pos)
        if size > self.frame_max > 0:
            raise _frame_too_large(kind, size, self.frame_max)
        start = pos + 7
        end = start + size
        if end >= len(buf):
            if kind not in _KNOWN_FRAME_TYPES:
                raise FrameError(_FRAME_ERROR, f"FRAME_ERROR - unknown frame type {kind}")
            self._need = size + 8
            return NEED_DATA
        self._need = 0
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
            frame = BodyFrame(channel, buf[start:end])  # its one copy
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
                frame = self._last_header = _header_frame(channel, payload)
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
        return ProtocolHeader(self._buf[pos : pos + 8])


# A frame still arriving that is larger than this collects its chunks (FrameReader.feed)
# rather than being copied again with each read.
_COLLECT_ABOVE: Final = 65536


_BASIC_PUBLISH_INDEX: Final = 60 << 16 | 40
_KNOWN_FRAME_TYPES: Final = frozenset((FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT))


def _frame_too_large(kind: int, size: int, frame_max: int) -> FrameError:
    return FrameError(
        _FRAME_ERROR,
        f"FRAME_ERROR - type {kind} frame payload of {size} bytes is larger than "
        f"frame_max {frame_max}",
    )


def _content_on_channel_zero(kind: int) -> FrameError:
    return FrameError(_UNEXPECTED_FRAME, f"UNEXPECTED_FRAME - type {kind} frame on channel 0")


def _header_frame(channel: int, payload: bytes) -> HeaderFrame:
    if channel == 0:
        raise _content_on_channel_zero(FRAME_HEADER)
    if len(payload) < 14:  # class, weight, body size, property flags
        raise FrameError(
            _FRAME_ERROR, f"FRAME_ERROR - content header frame of {len(payload)} bytes"
        )
    class_id, weight, body_size = _HEADER_FIELDS.unpack_from(payload, 0)
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
    return HeaderFrame(channel, class_id, body_size, payload[12:])


def _heartbeat_frame(channel: int, size: int) -> HeartbeatFrame:
    if size:
        raise FrameError(_FRAME_ERROR, f"FRAME_ERROR - heartbeat frame with a {size}-byte payload")
    if channel:
        raise FrameError(
            _UNEXPECTED_FRAME, f"UNEXPECTED_FRAME - heartbeat frame on channel {channel}"
        )
    return _HEARTBEAT


_HEARTBEAT: Final = HeartbeatFrame(0)
