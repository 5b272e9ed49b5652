"""A stream's append-only log: numbered segments of CRC-checked records.

Layout of one stream directory::

    00000000000000000000.seg   records whose offsets start at the name's number
    00000000000000000000.idx   sparse index of that segment: (offset, position, timestamp)
    producers.json             last publishing id per producer, as of offset ``upto``
    offsets.log                stored consumer offsets (see stream_offsets.py)
    meta.json                  the stream's vhost, name and arguments (for recovery)

A record is ``crc32 | length | offset | timestamp_ms | publishing_id | name_len`` then the
producer name and the payload; the CRC covers everything after itself. The log knows
nothing of messages: the payload is opaque bytes, except in a chunk record (bit 0x8000 of
the name length; stream_chunk.py), which holds many messages, one offset each. Retention
drops whole old segments.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import time
import zlib
from collections.abc import Sequence
from pathlib import Path

from roost.store.atomic_file import replace_file
from roost.store.files import append_all, fsync_path, make_dirs, truncate_quietly
from roost.store.stream_chunk import chunk_record
from roost.store.stream_reader import StreamReader
from roost.store.stream_recovery import load_segments, recover_tail
from roost.store.stream_segment import (
    CRC,
    DEFAULT_SEGMENT_BYTES,
    HEADER,
    INDEX_ENTRY,
    INDEX_EVERY,
    SEGMENT_SUFFIX,
    Segment,
    crc_record,
    segment_name,
)
from roost.store.stream_truncate import cut_segments, restart_at


class StreamLog:
    """Append, read from an offset or a time, retention, producer ids, group commit."""

    def __init__(
        self,
        directory: Path,
        *,
        max_segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        max_bytes: int = 0,
        max_age_ms: int = 0,
    ) -> None:
        self.directory = directory
        self.max_segment_bytes = max_segment_bytes or DEFAULT_SEGMENT_BYTES
        self.max_bytes = max_bytes
        self.max_age_ms = max_age_ms
        make_dirs(directory)
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self.next_offset = 0
        # the first offset of the last record (a chunk record's first message): where
        # ``last`` starts, as RabbitMQ starts it at its last chunk's first message
        self.last_chunk_offset = 0
        self.last_timestamp = 0
        self.producers: dict[str, int] = {}
        self.dirty = False
        self.dropped_bytes = 0  # what recovery cut off a torn tail (reported, not hidden)
        self._fd = -1
        self._idx_fd = -1
        self._last_indexed = -INDEX_EVERY
        self._recover()

    # -- recovery -------------------------------------------------------------------------

    def _recover(self) -> None:
        self.segments.extend(load_segments(self.directory))
        self.bases.extend(seg.base for seg in self.segments)
        self.next_offset = self.bases[0] if self.bases else 0
        if self.segments:
            tail = recover_tail(self.segments)
            if tail.dropped_bytes:
                self.dropped_bytes = tail.dropped_bytes
            self.next_offset = tail.next_offset
            self.last_timestamp = tail.last_timestamp
            self.last_chunk_offset = tail.last_chunk_offset
        self._load_producers()
        if not self.segments:
            self._open_segment(self.next_offset)
        else:
            self._open_active(self.segments[-1])

    def _load_producers(self) -> None:
        path = self.directory / "producers.json"
        upto = self.first_offset
        with contextlib.suppress(FileNotFoundError, ValueError):
            saved = json.loads(path.read_text())
            if int(saved["upto"]) <= self.next_offset:  # else the log lost its tail: rebuild
                self.producers = {str(k): int(v) for k, v in saved["producers"].items()}
                upto = max(int(saved["upto"]), upto)
        # records written after the snapshot still carry their producer: replay them
        with self.reader(upto) as reader:
            while (record := reader.next()) is not None:
                if record.producer:
                    self._note_producer(record.producer, record.publishing_id)

    def _note_producer(self, producer: str, publishing_id: int) -> None:
        """Keep ``producers`` ordered by last activity (the offset query lists the most
        recent ones first): re-inserting moves a name to the end."""
        producers = self.producers
        producers.pop(producer, None)
        producers[producer] = publishing_id

    def _save_producers(self) -> None:
        # not fsynced: loading rebuilds a lost or stale snapshot from the records
        path = self.directory / "producers.json"
        raw = json.dumps({"upto": self.next_offset, "producers": self.producers}).encode()
        replace_file(path, raw, tmp=path.with_suffix(".tmp"), durable=False)

    # -- segments -------------------------------------------------------------------------

    def _open_active(self, seg: Segment) -> None:
        self._fd = os.open(seg.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._idx_fd = os.open(seg.index_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._last_indexed = seg.idx_positions[-1] if seg.idx_positions else -INDEX_EVERY

    def _open_segment(self, base: int) -> None:
        seg = Segment(self.directory, base)
        self.segments.append(seg)
        self.bases.append(base)
        self._open_active(seg)
        fsync_path(self.directory)  # the new files' entries (their data: the group commit)

    def _roll(self) -> None:
        os.fsync(self._fd)
        os.close(self._fd)
        os.close(self._idx_fd)
        self._save_producers()
        self._open_segment(self.next_offset)
        self.apply_retention()

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Drop whole old segments (never the active one). Returns how many went."""
        dropped = 0
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        while len(self.segments) > 1:
            oldest, following = self.segments[0], self.segments[1]
            too_big = self.max_bytes and self.total_bytes > self.max_bytes
            # every record of ``oldest`` is older than the first one of the next segment
            newest_ts = following.first_timestamp
            too_old = (
                self.max_age_ms and newest_ts is not None and newest_ts < now_ms - self.max_age_ms
            )
            if not (too_big or too_old):
                break
            self.segments.pop(0)
            self.bases.pop(0)
            oldest.path.unlink(missing_ok=True)
            oldest.index_path.unlink(missing_ok=True)
            dropped += 1
        return dropped

    # -- properties -----------------------------------------------------------------------

    @property
    def first_offset(self) -> int:
        return self.bases[0] if self.bases else self.next_offset

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def first_timestamp(self) -> int | None:
        for seg in self.segments:
            if seg.first_timestamp is not None:
                return seg.first_timestamp
        return None

    # -- writing --------------------------------------------------------------------------

    def append(
        self, payload: bytes, *, timestamp_ms: int, producer: str = "", publishing_id: int = 0
    ) -> int:
        """Write one record; it is readable at once and durable after ``sync``."""
        seg = self.segments[-1]
        if seg.size >= self.max_segment_bytes:
            self._roll()
            seg = self.segments[-1]
        offset = self.next_offset
        record = crc_record(offset, timestamp_ms, publishing_id, producer.encode("utf-8"), payload)
        position = seg.size
        indexed = ((offset, position),) if position - self._last_indexed >= INDEX_EVERY else ()
        self._write(seg, record, indexed, offset, offset + 1, timestamp_ms, producer,
                    publishing_id)
        return offset

    def append_many(
        self,
        prefix: bytes,
        payloads: Sequence[bytes | memoryview],
        *,
        timestamp_ms: int,
        producer: str = "",
        first_id: int = 0,
    ) -> int:
        """Write one record per payload (``prefix + payload``; publishing ids ``first_id``
        upwards when ``producer`` is set), as many ``append`` calls would, but with one
        write per segment touched. Returns the first offset. A failed write keeps nothing
        of the records it carried; those written to an earlier segment stay."""
        first_offset = self.next_offset
        name = producer.encode("utf-8")
        fixed = HEADER.size - 8 + len(name) + len(prefix)
        pack, crc32, crc_pack = HEADER.pack, zlib.crc32, CRC.pack
        i, n = 0, len(payloads)
        while i < n:
            seg = self.segments[-1]
            if seg.size >= self.max_segment_bytes:
                self._roll()
                seg = self.segments[-1]
            position = seg.size
            offset = self.next_offset
            last_indexed = self._last_indexed
            parts: list[bytes | memoryview] = []
            indexed: list[tuple[int, int]] = []
            while i < n and position < self.max_segment_bytes:
                payload = payloads[i]
                length = fixed + len(payload)
                pid = first_id + i if producer else 0
                head = pack(0, length, offset, timestamp_ms, pid, len(name))[4:]
                crc = crc32(payload, crc32(prefix, crc32(name, crc32(head))))
                parts += (crc_pack(crc), head, name, prefix, payload)
                if position - last_indexed >= INDEX_EVERY:
                    indexed.append((offset, position))
                    last_indexed = position
                position += length + 8
                offset += 1
                i += 1
            self._write(
                seg, b"".join(parts), indexed, offset - 1, offset, timestamp_ms, producer,
                first_id + i - 1,
            )
        return first_offset

    def append_chunk(
        self,
        prefix: bytes,
        entries: bytes | memoryview,
        count: int,
        *,
        timestamp_ms: int,
        producer: str = "",
        first_id: int = 0,
    ) -> int:
        """Write ``count`` ``entries`` (stream_chunk.py: ``u32 length | message`` each, one
        after the other) as ONE chunk
        record, offsets from the next one, publishing ids ``first_id`` upwards when
        ``producer`` is set. Returns the first offset; a failed write keeps nothing."""
        seg = self.segments[-1]
        if seg.size >= self.max_segment_bytes:
            self._roll()
            seg = self.segments[-1]
        offset = self.next_offset
        last_id = first_id + count - 1 if producer else 0
        name = producer.encode("utf-8")
        record = chunk_record(offset, timestamp_ms, last_id, name, prefix, entries, count)
        position = seg.size
        indexed = ((offset, position),) if position - self._last_indexed >= INDEX_EVERY else ()
        self._write(seg, record, indexed, offset, offset + count, timestamp_ms, producer,
                    last_id)
        return offset

    def _write(
        self,
        seg: Segment,
        records: bytes,
        indexed: Sequence[tuple[int, int]],
        last_start: int,
        next_offset: int,
        timestamp_ms: int,
        producer: str,
        last_id: int,
    ) -> None:
        """Append whole ``records`` to the active segment, and index entries for those
        starting at ``indexed`` (offset, position); then the log moves on to
        ``next_offset``, its last record starting at ``last_start``. Nothing of a refused
        write stays: neither its records nor its index entries."""
        start = seg.size
        append_all(self._fd, records, start)
        if indexed:
            entries = len(seg.idx_offsets)
            index = b"".join(seg.add_index(o, p, timestamp_ms) for o, p in indexed)
            try:
                append_all(self._idx_fd, index, entries * INDEX_ENTRY.size)
            except OSError:
                seg.drop_index_from(entries)
                truncate_quietly(self._fd, start)
                raise
            self._last_indexed = indexed[-1][1]
        seg.size = start + len(records)
        self.next_offset = next_offset
        self.last_chunk_offset = last_start
        self.last_timestamp = timestamp_ms
        if producer:
            self._note_producer(producer, last_id)
        self.dirty = True

    def truncate(self, offset: int) -> int:
        """Remove the records at ``offset`` and after, on disk before it returns (a chunk
        record holding ``offset`` goes whole); returns the new next offset. Crash-safe:
        stream_truncate.py."""
        offset = max(offset, self.first_offset)
        if offset >= self.next_offset:
            return self.next_offset
        self._close_files()
        cut_segments(self.directory, self.segments, offset)
        self._reopen()
        return self.next_offset

    def restart_at(self, base: int) -> None:
        """Drop every record: the log goes on, empty, at offset ``base``."""
        self._close_files()
        restart_at(self.directory, self.segments, base, segment_name(base) + SEGMENT_SUFFIX)
        self._reopen()

    def _close_files(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            os.close(self._idx_fd)
            self._fd = self._idx_fd = -1
        self.dirty = False

    def _reopen(self) -> None:
        self.segments, self.bases = [], []
        self.next_offset = self.last_chunk_offset = self.last_timestamp = 0
        self.producers.clear()  # the same dict (DiskStream shares it); rebuilt from records
        self._recover()

    def is_duplicate(self, producer: str, publishing_id: int) -> bool:
        last = self.producers.get(producer)
        return last is not None and publishing_id <= last

    @property
    def active_path(self) -> Path:
        """The segment file appends go to."""
        return self.segments[-1].path

    def sync(self) -> None:
        """Group commit: one fsync covers every record appended since the last one."""
        if self.dirty and self._fd >= 0:
            os.fsync(self._fd)
            self.dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            os.close(self._idx_fd)
            self._fd = self._idx_fd = -1
            self._save_producers()

    # -- reading --------------------------------------------------------------------------

    def segment_for(self, offset: int) -> int:
        """Index into ``segments`` of the segment holding ``offset``."""
        return max(bisect.bisect_right(self.bases, offset) - 1, 0)

    def reader(self, offset: int) -> StreamReader:
        return StreamReader(self, max(offset, self.first_offset))

    def offset_for_time(self, ts_ms: int) -> int:
        """The first offset whose timestamp is at or after ``ts_ms`` (next offset if none)."""
        start = 0
        for i, seg in enumerate(self.segments):
            first = seg.first_timestamp
            if first is not None and first < ts_ms:
                start = i
        if not self.segments:
            return self.next_offset
        seg = self.segments[start]
        with StreamReader(self, seg.base, position=seg.seek_time(ts_ms)) as reader:
            while (record := reader.next()) is not None:
                if record.timestamp >= ts_ms:
                    return record.offset
        return self.next_offset
