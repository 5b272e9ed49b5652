"""The stream log on its own: append/read, indexes, retention, recovery from damage."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from roost.store import files, stream_log
from roost.store.stream_log import StreamLog
from roost.store.stream_offsets import OffsetStore
from roost.store.stream_segment import HEADER, INDEX_ENTRY, INDEX_EVERY
from tests.unit.stream_logs import every_record, fill, offsets

RECORD_BYTES = HEADER.size + 105  # the refused record below: 105 bytes, no producer


def test_append_read_from_any_offset_across_segments(tmp_path: Path) -> None:
    log = StreamLog(tmp_path, max_segment_bytes=2000)
    fill(log, 200)
    assert len(log.segments) > 5
    assert offsets(log) == list(range(200))
    assert offsets(log, 137) == list(range(137, 200))
    reader = log.reader(77)
    record = reader.next()
    reader.close()
    assert record is not None and record.payload.startswith(b"00077")
    assert log.offset_for_time(1000 + 150) == 150
    assert log.offset_for_time(10**12) == 200


def test_new_directories_and_segments_are_synced_into_their_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a power cut: the entries of the directories made for a stream, and of each new
    segment file, are fsynced (the group commit fsyncs only the files' data)."""
    synced: list[Path] = []
    monkeypatch.setattr(files, "fsync_path", synced.append)
    monkeypatch.setattr(stream_log, "fsync_path", synced.append)
    directory = tmp_path / "vhost" / "streams" / "s"
    log = StreamLog(directory, max_segment_bytes=2000)
    assert {tmp_path, tmp_path / "vhost", directory.parent, directory} <= set(synced)
    synced.clear()
    fill(log, 50)  # several rolls
    assert len(log.segments) > 1 and synced.count(directory) >= len(log.segments) - 1


def test_reopen_keeps_offsets_and_producers(tmp_path: Path) -> None:
    log = StreamLog(tmp_path, max_segment_bytes=2000)
    fill(log, 50)
    log.close()
    log = StreamLog(tmp_path, max_segment_bytes=2000)
    assert (log.first_offset, log.next_offset) == (0, 50)
    assert log.producers == {"p": 50} and log.is_duplicate("p", 50)
    assert log.append(b"more", timestamp_ms=5000) == 50


def test_torn_tail_is_cut_and_reported(tmp_path: Path) -> None:
    log = StreamLog(tmp_path)
    fill(log, 10)
    log.sync()  # a crash: no close, then half a record on disk
    seg = log.segments[-1].path
    seg.write_bytes(seg.read_bytes()[:-40])
    log = StreamLog(tmp_path)
    assert log.next_offset == 9 and log.dropped_bytes > 0
    assert offsets(log) == list(range(9))
    assert log.producers == {"p": 9}  # rebuilt from the records that survived


def test_flipped_crc_ends_the_log_there(tmp_path: Path) -> None:
    log = StreamLog(tmp_path)
    fill(log, 10)
    seg = log.segments[-1].path
    data = bytearray(seg.read_bytes())
    record = len(data) // 10
    data[5 * record + 40] ^= 0xFF  # inside record 5's payload
    seg.write_bytes(bytes(data))
    log = StreamLog(tmp_path)
    assert offsets(log) == [0, 1, 2, 3, 4]


def test_retention_by_size_and_age_drops_whole_segments(tmp_path: Path) -> None:
    log = StreamLog(tmp_path, max_segment_bytes=2000, max_bytes=6000)
    fill(log, 200)
    assert 6000 - 2200 <= log.total_bytes <= 6000 + 2200
    assert offsets(log) == list(range(log.first_offset, 200))
    aged = StreamLog(tmp_path / "aged", max_segment_bytes=2000, max_age_ms=100)
    fill(aged, 200, ts0=0)
    assert aged.apply_retention(now_ms=10_000) > 0
    assert len(aged.segments) == 1  # only the active segment is never dropped


def test_offset_store_last_record_wins_and_torn_tail(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path / "offsets.log")
    store.store("a", 5)
    store.store("b", 7)
    store.store("a", 9)
    store.close()
    path = tmp_path / "offsets.log"
    path.write_bytes(path.read_bytes() + b"\x01\x02\x03")
    store = OffsetStore(path)
    assert store.offsets == {"a": 9, "b": 7}


class FillingDisk:
    """Stands in for ``os.write``: takes ``room`` more bytes, then fails with ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.real = os.write

    def __call__(self, fd: int, data: Any) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = self.real(fd, bytes(data[: self.room]))
        self.room -= n
        return n


@pytest.mark.parametrize("room", [10, RECORD_BYTES])  # torn record; record whole, index not
def test_an_append_refused_by_a_full_disk_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    log = StreamLog(tmp_path)
    fill(log, 100)
    seg = log.segments[-1]
    while seg.size - log._last_indexed < INDEX_EVERY:  # the next append writes an index entry
        fill(log, 1)
    written = log.next_offset
    indexed = len(seg.idx_offsets)
    with monkeypatch.context() as m:
        m.setattr(os, "write", FillingDisk(room))
        with pytest.raises(OSError) as refused:
            log.append(b"refused" + b"x" * 98, timestamp_ms=5000)
    assert refused.value.errno == errno.ENOSPC
    assert seg.path.stat().st_size == seg.size
    assert len(seg.idx_offsets) == indexed
    assert seg.index_path.stat().st_size == indexed * INDEX_ENTRY.size
    fill(log, 5, ts0=6000)  # space is back: appends follow the last whole record
    assert offsets(log) == list(range(written + 5))
    log.close()
    reopened = StreamLog(tmp_path)
    assert reopened.dropped_bytes == 0
    assert offsets(reopened) == list(range(written + 5))
    assert [r.payload[:5] for r in every_record(reopened.reader(written - 1))] == [
        b"00000", b"00000", b"00001", b"00002", b"00003", b"00004"
    ]


def test_an_offset_store_refused_by_a_full_disk_keeps_the_old_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = OffsetStore(tmp_path / "offsets")
    store.store("reader", 10)
    with monkeypatch.context() as m:
        m.setattr(os, "write", FillingDisk(5))
        with pytest.raises(OSError):
            store.store("reader", 20)
    assert store.offsets == {"reader": 10}
    store.store("other", 3)
    assert OffsetStore(tmp_path / "offsets").offsets == {"reader": 10, "other": 3}


@pytest.mark.parametrize("max_bytes", [1, 700, 4096, 9000, 1 << 20])
@pytest.mark.parametrize("start,end", [(0, None), (3, 250), (131, 132), (290, None)])
def test_chunks_are_whole_records_in_order_within_their_limits(
    tmp_path: Path, max_bytes: int, start: int, end: int | None
) -> None:
    """Chunks, whether cut by walking records or at sparse index entries, hold each
    record of [start, end) once, in order, as stored: within max_bytes (or one record),
    within one segment, never past the log's end or ``end``."""
    log = StreamLog(tmp_path, max_segment_bytes=40_000)
    sizes = [(i * 7919) % 1500 for i in range(300)]  # 0 to 1.5 kB, in no order
    for i, size in enumerate(sizes):
        log.append(b"%05d" % i + b"y" * size, timestamp_ms=1000 + i)
    assert len(log.segments) > 5
    stored = {r.offset: r.payload for r in every_record(log.reader(0))}
    reader = log.reader(start)
    got: list[tuple[int, bytes]] = []
    while (chunk := reader.next_chunk(max_bytes, end)) is not None:
        first, last, count, data = chunk
        assert count == last - first + 1 and (len(data) <= max_bytes or count == 1)
        pos, offsets_in = 0, []
        while pos < len(data):
            _crc, length, offset, _ts, _pid, nlen = HEADER.unpack_from(data, pos)
            offsets_in.append(offset)
            got.append((offset, data[pos + HEADER.size + nlen : pos + 8 + length]))
            pos += 8 + length
        assert offsets_in == list(range(first, last + 1))
    reader.close()
    stop = 300 if end is None else end
    assert got == [(o, stored[o]) for o in range(start, stop)]
