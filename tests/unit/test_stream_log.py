"""The stream log on its own: append/read, indexes, retention, recovery from damage."""

from __future__ import annotations

from pathlib import Path

from roost.store.stream_log import StreamLog
from roost.store.stream_offsets import OffsetStore


def fill(log: StreamLog, n: int, ts0: int = 1000, size: int = 100) -> None:
    for i in range(n):
        log.append(
            b"%05d" % i + b"x" * size, timestamp_ms=ts0 + i, producer="p", publishing_id=i + 1
        )


def offsets(log: StreamLog, start: int = 0) -> list[int]:
    return [r.offset for r in log.reader(start).drain()]


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
