"""The stream protocol's types (PROTOCOL.adoc, "Types"): big-endian integers; string =
int16 length + UTF-8 (-1: null); bytes = int32 length + data (-1: null); arrays =
int32 count + items; maps are arrays of string pairs. A body that ends early, or a
string that is not UTF-8, is malformed: UNKNOWN_FRAME, the code RabbitMQ closes with
when its parser cannot match a frame.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Final

from roost.stream_protocol.constants import UNKNOWN_FRAME
from roost.stream_protocol.errors import StreamProtocolError

U8: Final = struct.Struct(">B")
U16: Final = struct.Struct(">H")
U32: Final = struct.Struct(">I")
I32: Final = struct.Struct(">i")
U64: Final = struct.Struct(">Q")
I64: Final = struct.Struct(">q")
NULL_STRING: Final = b"\xff\xff"
NULL_BYTES: Final = b"\xff\xff\xff\xff"


def string(text: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise ValueError("string longer than 32,767 bytes")
    return U16.pack(len(raw)) + raw


def data(raw: bytes) -> bytes:
    return I32.pack(len(raw)) + raw


def strings(items: Iterable[str]) -> bytes:
    parts = [string(s) for s in items]
    return U32.pack(len(parts)) + b"".join(parts)


def string_map(items: Mapping[str, str]) -> bytes:
    parts = [string(k) + string(v) for k, v in items.items()]
    return U32.pack(len(parts)) + b"".join(parts)


class Reader:
    """Reads one frame's body (after key and version)."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise StreamProtocolError(UNKNOWN_FRAME, f"frame ends inside the {what}")
        self.pos = pos + n
        return pos

    def u8(self, what: str) -> int:
        value: int = self.buf[self._need(1, what)]
        return value

    def u16(self, what: str) -> int:
        value: int = U16.unpack_from(self.buf, self._need(2, what))[0]
        return value

    def u32(self, what: str) -> int:
        value: int = U32.unpack_from(self.buf, self._need(4, what))[0]
        return value

    def i32(self, what: str) -> int:
        value: int = I32.unpack_from(self.buf, self._need(4, what))[0]
        return value

    def u64(self, what: str) -> int:
        value: int = U64.unpack_from(self.buf, self._need(8, what))[0]
        return value

    def i64(self, what: str) -> int:
        value: int = I64.unpack_from(self.buf, self._need(8, what))[0]
        return value

    def raw(self, n: int, what: str) -> bytes:
        pos = self._need(n, what)
        return bytes(self.buf[pos : pos + n])

    def string(self, what: str) -> str:
        size = self.u16(what)
        pos = self._need(size, what)
        try:
            return str(self.buf[pos : pos + size], "utf-8")
        except UnicodeDecodeError:
            raise StreamProtocolError(UNKNOWN_FRAME, f"{what} is not UTF-8") from None

    def nullable_string(self, what: str) -> str | None:
        if self.remaining() >= 2 and self.buf[self.pos : self.pos + 2] == NULL_STRING:
            self.pos += 2
            return None
        return self.string(what)

    def data(self, what: str) -> bytes:
        size = self.i32(what)
        if size == -1:
            return b""
        return self.raw(size, what)

    def count(self, what: str) -> int:
        """An array's count (its items are read one by one, so a count larger than the
        frame runs out of bytes and is malformed like any other overrun)."""
        return self.u32(what)

    def strings(self, what: str) -> list[str]:
        return [self.string(what) for _ in range(self.count(what))]

    def string_map(self, what: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for _ in range(self.count(what)):
            key = self.string(what)
            out[key] = self.string(what)
        return out

    def rest(self) -> bytes:
        return self.raw(self.end - self.pos, "frame")

    def done(self, what: str) -> None:
        if self.pos != self.end:
            raise StreamProtocolError(
                UNKNOWN_FRAME, f"{self.end - self.pos} bytes after the end of {what}"
            )
