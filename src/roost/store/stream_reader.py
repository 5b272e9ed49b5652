"""Sequential reading of a stream log from an offset: what one consumer's cursor holds."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from roost.store.stream_log import StreamLog

_HEADER = struct.Struct("<IIQqqH")


class Record(NamedTuple):
    offset: int
    timestamp: int  # milliseconds since the epoch
    producer: str
    publishing_id: int
    payload: bytes


class StreamReader:
    """Yields records at or after ``offset``; ``next()`` is None at the tail (for now).

    Records were checked by CRC when the log was recovered or written by this process, so
    reading skips the checksum. A segment dropped by retention under the reader makes it
    jump to the oldest offset still kept.
    """

    def __init__(self, log: StreamLog, offset: int, *, position: int | None = None) -> None:
        self.log = log
        self.offset = offset  # the next offset this reader will return
        self._base = -1
        self._file: IO[bytes] | None = None
        self._start_position = position

    def _open(self) -> bool:
        log = self.log
        if not log.segments:
            return False
        if self.offset < log.first_offset:
            self.offset = log.first_offset
        seg = log.segments[log.segment_for(self.offset)]
        self.close()
        try:
            self._file = open(seg.path, "rb")  # noqa: SIM115 - held across calls
        except FileNotFoundError:
            return False
        position = self._start_position
        self._start_position = None
        self._file.seek(seg.seek_offset(self.offset) if position is None else position)
        self._base = seg.base
        return True

    def _advance_segment(self) -> bool:
        """At the end of our segment: move on when a later one exists."""
        log = self.log
        later = [s for s in log.segments if s.base > self._base]
        if not later:
            return False
        self.offset = max(self.offset, later[0].base)
        return self._open()

    def next(self) -> Record | None:
        f = self._file
        if f is None:
            if not self._open():
                return None
            f = self._file
            assert f is not None
        while True:
            if self.offset >= self.log.next_offset:
                return None
            start = f.tell()
            head = f.read(_HEADER.size)
            if len(head) < _HEADER.size:
                f.seek(start)
                if not self._advance_segment():
                    return None
                f = self._file
                assert f is not None
                continue
            _crc, length, offset, ts, pid, nlen = _HEADER.unpack(head)
            rest = f.read(length - (_HEADER.size - 8))
            if offset < self.offset:
                continue  # between the sparse index entry and the wanted offset
            name = rest[:nlen].decode("utf-8") if nlen else ""
            self.offset = offset + 1
            return Record(offset, ts, name, pid, rest[nlen:])

    def drain(self) -> Iterator[Record]:
        """Every record up to the current tail, then close."""
        try:
            while (record := self.next()) is not None:
                yield record
        finally:
            self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
