"""Cutting a stream log's tail in place (a replica's uncommitted records): across segments,
through a chunk record, interrupted part-way (a crash leaves a prefix), restarting at a
later base, and the committed mark."""

from __future__ import annotations

from pathlib import Path

from roost.codecs.stream_message import message_prefix
from roost.store import stream_truncate
from roost.store.stream_log import StreamLog
from roost.store.stream_store import DiskStream
from tests.unit.stream_logs import data_section, entries, every_record, fill, offsets


def test_truncate_across_segments_then_append_goes_on_at_the_cut(tmp_path: Path) -> None:
    log = StreamLog(tmp_path, max_segment_bytes=2000)
    fill(log, 200)
    segments = len(log.segments)
    assert log.truncate(73) == 73
    assert len(log.segments) < segments
    assert offsets(log) == list(range(73))
    assert log.producers == {"p": 73}  # rebuilt from the records kept
    assert log.append(b"new", timestamp_ms=5) == 73
    log.close()
    again = StreamLog(tmp_path, max_segment_bytes=2000)  # on disk as in memory
    assert offsets(again) == list(range(74))
    assert [r.payload for r in every_record(again.reader(72))][-1] == b"new"
    assert sorted(p.name for p in tmp_path.glob("*.seg")) == [
        s.path.name for s in again.segments
    ]
    assert again.truncate(500) == 74  # nothing past the end: nothing cut
    assert again.truncate(0) == 0 and offsets(again) == []
    assert again.append(b"x", timestamp_ms=1) == 0


def test_a_chunk_straddling_the_cut_goes_whole(tmp_path: Path) -> None:
    log = StreamLog(tmp_path)
    prefix = message_prefix("", "s")
    log.append_chunk(prefix, entries([data_section(b"a")] * 3), 3, timestamp_ms=1)  # 0..2
    log.append_chunk(prefix, entries([data_section(b"b")] * 4), 4, timestamp_ms=2)  # 3..6
    assert log.truncate(5) == 3
    assert offsets(log) == [0, 1, 2]
    assert log.last_chunk_offset == 0


def test_a_cut_interrupted_after_the_newest_segment_went_leaves_a_prefix(
    tmp_path: Path,
) -> None:
    log = StreamLog(tmp_path, max_segment_bytes=2000)
    fill(log, 100)
    log.close()
    newest = sorted(tmp_path.glob("*.seg"))[-1]
    newest.unlink()  # the first step of a cut, then a crash
    recovered = StreamLog(tmp_path, max_segment_bytes=2000)
    kept = offsets(recovered)
    assert kept == list(range(len(kept))) and 0 < len(kept) < 100
    assert recovered.truncate(10) == 10  # the cut, done again, completes
    assert offsets(recovered) == list(range(10))


def test_restart_at_a_later_base_and_the_committed_mark(tmp_path: Path) -> None:
    stream = DiskStream(tmp_path / "s", {"vhost": "/", "name": "s", "arguments": {}})
    for i in range(10):
        stream.append("", "s", (), b"m%d" % i, timestamp_ms=i)
    assert stream.committed_mark == 0
    stream.mark_committed(7)
    assert stream.committed_mark == 7
    assert stream.truncate(7) == 7
    stream.restart_at(500)
    assert (stream.first_offset, stream.next_offset) == (500, 500)
    assert stream.append("", "s", (), b"later", timestamp_ms=1) == 500
    stream.close()
    reopened = DiskStream(tmp_path / "s", {"vhost": "/", "name": "s", "arguments": {}})
    assert (reopened.first_offset, reopened.next_offset) == (500, 501)
    assert reopened.committed_mark == 7
    assert (tmp_path / "s" / stream_truncate.MARK).exists()


def test_a_memory_stream_truncates_and_restarts_as_the_disk_one() -> None:
    from roost.store.memory_streams import MemoryStream

    stream = MemoryStream(0, 0)
    for i in range(10):
        stream.append("", "s", (), b"m%d" % i, timestamp_ms=i)
    assert stream.truncate(4) == 4 and stream.next_offset == 4
    assert stream.append("", "s", (), b"new", timestamp_ms=1) == 4
    stream.mark_committed(3)
    assert stream.committed_mark == 3
    stream.restart_at(100)
    assert (stream.first_offset, stream.next_offset) == (100, 100)
