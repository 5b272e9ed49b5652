"""Sequential reading of a stream log from an offset: what one consumer's cursor holds."""

from __future__ import annotations

import bisect
import os
import struct
from collections import deque
from typing import IO, TYPE_CHECKING, Final, NamedTuple

from roost.codecs.chunk_layout import CHUNK_FLAG, NAME_MASK, chunk_count, osiris_start
from roost.store.stream_chunk import messages, plain_run

if TYPE_CHECKING:
    from roost.store.stream_log import StreamLog

# a record on disk: crc32, length of what follows the first 8 bytes, offset, timestamp
# (ms), publishing id, producer name length; then the name and the payload
_HEADER: Final = struct.Struct("<IIQqqH")
_LENGTH_OFFSET: Final = struct.Struct("<IQ")
_NAME_LENGTH: Final = struct.Struct("<H")  # at byte 32 of a record


class Record(NamedTuple):
    offset: int
    timestamp: int  # milliseconds since the epoch
    producer: str
    publishing_id: int
    payload: bytes


READ_AHEAD: Final = 256 * 1024  # bytes read from the segment at a time


class StreamReader:
    """Yields records at or after ``offset``; ``next()`` is None at the tail (for now).

    Records were checked by CRC when the log was recovered or written by this process, so
    reading skips the checksum. A segment dropped by retention under the reader makes it
    jump to the oldest offset still kept. Reads go through a buffer of ``READ_AHEAD``
    bytes: one ``read`` serves many records.
    """

    def __init__(self, log: StreamLog, offset: int, *, position: int | None = None) -> None:
        self.log = log
        self.offset = offset  # the next offset this reader will return
        self._base = -1
        self._file: IO[bytes] | None = None
        self._start_position = position
        self._buf = b""
        self._pos = 0  # where the next record starts in _buf
        self._pending: deque[Record] = deque()  # the rest of an expanded chunk record

    def _open(self) -> bool:
        log = self.log
        if not log.segments:
            return False
        if self.offset < log.first_offset:
            self.offset = log.first_offset
        seg = log.segments[log.segment_for(self.offset)]
        self.close()
        try:
            self._file = open(seg.path, "rb", buffering=0)  # noqa: SIM115 - held across calls
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

    def _fill(self, need: int) -> bool:
        """Make ``need`` bytes available from ``_pos``; False at the end of the file."""
        f = self._file
        assert f is not None
        kept = len(self._buf) - self._pos
        if kept and need > READ_AHEAD:
            # a record bigger than the read-ahead (a stream-protocol chunk record of 1 KiB
            # messages is ~520 KB): read it again from its start, whole, rather than join
            # the kept part to the rest, which copied the whole record once more. The
            # buffer is then the record alone and the run sliced from it is that object.
            f.seek(-kept, os.SEEK_CUR)
            self._buf = f.read(need)
            self._pos = 0
            return len(self._buf) >= need
        rest = self._buf[self._pos :]
        chunk = f.read(max(READ_AHEAD, need - len(rest)))
        self._buf = rest + chunk if rest else chunk
        self._pos = 0
        return len(self._buf) >= need

    def next(self) -> Record | None:
        if self._pending:
            record = self._pending.popleft()
            self.offset = record.offset + 1
            return record
        if self._file is None and not self._open():
            return None
        size = _HEADER.size
        while True:
            if self.offset >= self.log.next_offset:
                return None
            buf = self._buf
            pos = self._pos
            if len(buf) - pos < size and not self._fill(size):
                if not self._advance_segment():
                    return None  # a record still being written: read it next time
                continue
            buf = self._buf
            pos = self._pos
            _crc, length, offset, ts, pid, nlen = _HEADER.unpack_from(buf, pos)
            end = pos + 8 + length
            if end > len(buf):
                if not self._fill(8 + length):
                    return None
                buf = self._buf
                pos = 0
                end = 8 + length
            self._pos = end
            if nlen & CHUNK_FLAG:
                found = self._expand(buf, pos, end, offset, ts, pid, nlen & NAME_MASK)
                if not found:
                    continue  # wholly before the wanted offset
                self._pending.extend(found[1:])
                self.offset = found[0].offset + 1
                return found[0]
            if offset < self.offset:
                continue  # between the sparse index entry and the wanted offset
            start = pos + size
            name = buf[start : start + nlen].decode("utf-8") if nlen else ""
            self.offset = offset + 1
            return Record(offset, ts, name, pid, buf[start + nlen : end])

    def _expand(
        self, buf: bytes, pos: int, end: int, offset: int, ts: int, pid: int, nlen: int
    ) -> list[Record]:
        """A chunk record's messages from the wanted offset on, each as a plain record's
        payload (stream_chunk.py)."""
        start = pos + _HEADER.size
        name = buf[start : start + nlen].decode("utf-8") if nlen else ""
        payload = start + nlen
        prefix = buf[payload : osiris_start(buf, payload)]
        found = messages(buf, payload, end)
        first_id = pid - len(found) + 1
        return [
            Record(offset + i, ts, name, first_id + i if name else 0, prefix + props + body)
            for i, (props, body) in enumerate(found)
            if offset + i >= self.offset
        ]

    def next_chunk(
        self, max_bytes: int, end: int | None, wire: bool = False
    ) -> tuple[int, int, int, bytes] | None:
        """Whole records from the current offset, as they are on disk, up to ``max_bytes``
        (at least one record) and before offset ``end``: (first offset, last offset,
        count, bytes), or None at the tail. One slice of the read buffer, no decoding:
        a chunk costs the broker one delivery however many records it holds.

        Chunk records (stream_chunk.py) go as they are when ``wire`` (the reader skips
        the messages before ``first`` of one it starts inside, and one may run past
        ``end``); otherwise they are expanded into plain records."""
        run = self._next_run(max_bytes, end)
        if run is None or wire:
            return run
        first, last, count, data = run
        data, count, last = plain_run(data, first, end)
        if not count:
            return self.next_chunk(max_bytes, end) if self.offset > first else None
        return first, last, count, data

    def _next_run(self, max_bytes: int, end: int | None) -> tuple[int, int, int, bytes] | None:
        if self._file is None and not self._open():
            return None
        jumped = self._chunk_by_index(max_bytes, end)
        if jumped is not None:
            return jumped
        size = _HEADER.size
        start = count = 0
        first = last = -1
        while True:
            if self.offset >= self.log.next_offset or (end is not None and self.offset >= end):
                break
            buf, pos = self._buf, self._pos
            if len(buf) - pos < size:
                if count:
                    break  # refilling moves the buffer: end the chunk here
                if not self._fill(size) and not self._advance_segment():
                    return None
                continue
            length, offset = _LENGTH_OFFSET.unpack_from(buf, pos + 4)
            rec_end = pos + 8 + length
            if rec_end > len(buf):
                if count:
                    break
                if not self._fill(8 + length):
                    return None
                continue
            nlen = _NAME_LENGTH.unpack_from(buf, pos + 32)[0]
            n = 1
            if nlen & CHUNK_FLAG:
                n = chunk_count(buf, pos + size + (nlen & NAME_MASK))
            if offset + n <= self.offset:
                self._pos = rec_end  # between the sparse index entry and the wanted offset
                continue
            if count and rec_end - start > max_bytes:
                break
            if not count:
                start, first = pos, max(offset, self.offset)
            count += offset + n - max(offset, self.offset)
            last = offset + n - 1
            self._pos = rec_end
            self.offset = offset + n
        if not count:
            return None
        return first, last, count, self._buf[start : self._pos]

    def _chunk_by_index(
        self, max_bytes: int, end: int | None
    ) -> tuple[int, int, int, bytes] | None:
        """``next_chunk`` without walking the records: the segment's sparse index names
        record starts, so the chunk runs from here to the last indexed record start that
        keeps it within ``max_bytes`` and before ``end`` and the log's end. None when no
        such entry lies ahead (the caller walks record by record)."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos < _HEADER.size or self._file is None:
            return None
        offset = _LENGTH_OFFSET.unpack_from(buf, pos + 4)[1]
        if offset != self.offset:
            return None  # not yet at the wanted offset (after a seek to an index entry)
        log = self.log
        i = bisect.bisect_left(log.bases, self._base)
        if i == len(log.bases) or log.bases[i] != self._base:
            return None  # our segment went (retention): the walk moves on
        seg = log.segments[i]
        here = self._file.tell() - len(buf) + pos  # file position of this record
        limit = log.next_offset if end is None else min(end, log.next_offset)
        k = min(
            bisect.bisect_right(seg.idx_positions, here + max_bytes),
            bisect.bisect_right(seg.idx_offsets, limit),
        ) - 1
        if k < 0 or seg.idx_offsets[k] <= offset:
            return None
        stop, stop_offset = seg.idx_positions[k], seg.idx_offsets[k]
        need = stop - here
        if len(buf) - pos < need:
            if not self._fill(need):
                return None
            buf, pos = self._buf, 0
        self._pos = pos + need
        self.offset = stop_offset
        return offset, stop_offset - 1, stop_offset - offset, buf[pos : pos + need]

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(self, *_exc: object) -> None:
        # a ``with`` block, not a generator's ``finally``: the compiled build does not run
        # the ``finally`` of a generator dropped unfinished (docs/compiled.md)
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._buf = b""
        self._pos = 0
        self._pending.clear()
