"""Sans-IO RabbitMQ stream protocol: ``FrameReader.feed()`` then ``next_frame()``, which
returns a frame (``frames.py``) or ``NEED_DATA``, and ``encode(frame)``.

Framing (PROTOCOL.adoc, "Frame Structure"): ``u32 size`` (not counting itself), then
``u16 key`` (high bit set on a response), ``u16 version`` and the body; most requests
start their body with a ``u32 correlation id`` and most responses follow it with a
``u16 response code``. Command layouts: PROTOCOL.adoc's section of the same name, with
the details the document leaves out taken from the broker's parser and encoder
(rabbit_stream_core.erl) and from the clients (rstream, the Go and Java clients):

- Tune is sent by the server as a request and answered with the response bit set
  (rstream answers without it; both are read);
- Open's response and Subscribe's and ResolveOffsetSpec's properties are left off
  when empty; SaslAuthenticate's empty data is sent as null (-1) and its response's
  challenge, when there is one, has a u16 length;
- Credit's response has no correlation id and comes only on a problem;
- Metadata's response has no response code of its own, one per stream instead;
- Publish version 2 puts a filter value (string, -1 for none) before each message;
  a version 1 message whose length has the high bit set is a sub-batch entry
  (``chunks.py``); Deliver version 2 puts the committed chunk id before the chunk.

Malformed input raises ``StreamProtocolError`` with the code RabbitMQ closes with;
``decode.py`` tables each case. The encoders are in ``encode.py``.
"""

from __future__ import annotations

from typing import Final

from roost.stream_protocol.constants import FRAME_TOO_LARGE
from roost.stream_protocol.decode import decode_frame
from roost.stream_protocol.encode import encode, encode_deliver_head
from roost.stream_protocol.errors import StreamProtocolError
from roost.stream_protocol.frames import Frame
from roost.stream_protocol.wire import U32

__all__ = ["NEED_DATA", "FrameReader", "decode_frame", "encode", "encode_deliver_head"]


class _NeedData:
    """The type of ``NEED_DATA``: more bytes are needed before the next frame."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


class FrameReader:
    """Incremental reader of one connection's frames. ``frame_max`` (0: no limit) is
    the largest size field accepted; the session lowers it before Open succeeds and
    sets the tuned value after, as RabbitMQ does."""

    def __init__(self, *, role: str = "server", frame_max: int = 0) -> None:
        if role not in ("server", "client"):
            raise ValueError(f"role must be 'server' or 'client', not {role!r}")
        self.role = role
        self.frame_max = frame_max
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_frame(self) -> Frame | _NeedData:
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            return NEED_DATA
        (size,) = U32.unpack_from(buf, pos)
        if self.frame_max and size > self.frame_max:
            raise StreamProtocolError(
                FRAME_TOO_LARGE, f"frame of {size} bytes above frame_max {self.frame_max}"
            )
        end = pos + 4 + size
        if len(buf) < end:
            return NEED_DATA
        with memoryview(buf) as view:  # one copy of the frame, the view released at once
            body = view[pos + 4 : end].tobytes()
        self._pos = end
        if end > 65_536 and end * 2 > len(buf):  # keep the buffer from growing forever
            del buf[:end]
            self._pos = 0
        return decode_frame(body, self.role)

    def frames(self) -> list[Frame]:
        out: list[Frame] = []
        while True:
            frame = self.next_frame()
            if isinstance(frame, _NeedData):
                return out
            out.append(frame)

