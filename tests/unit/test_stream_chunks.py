"""Chunk records in a stream log (store/stream_chunk.py): a stream client's Publish frame
stored as ONE record in the stream protocol's wire format, read back per message (offsets,
producer ids, AMQP properties) by plain readers, whole by the stream protocol's; crash
recovery keeps whole chunks only; retention, time lookup and dedup per message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

from roost.codecs.chunk_layout import CHUNK_FLAG
from roost.codecs.stream_message import decode_stream_message, message_prefix
from roost.pipeline.chunks import records
from roost.store.stream_chunk import OSIRIS_HEADER, RAW_HEADER
from roost.store.stream_log import StreamLog
from roost.store.stream_segment import HEADER
from roost.store.stream_store import DiskStream
from tests.unit.stream_logs import _U32, data_section, entries, every_record

PREFIX = message_prefix("", "s")


def bodies(log: StreamLog, start: int = 0) -> list[tuple[int, bytes]]:
    out = []
    for record in every_record(log.reader(start)):
        _ex, _rk, _props, body = decode_stream_message(record.payload)
        out.append((record.offset, body))
    return out


def test_a_chunk_record_reads_back_per_message_beside_plain_records(tmp_path: Path) -> None:
    log = StreamLog(tmp_path)
    log.append(PREFIX + b"\x00\x00plain-0", timestamp_ms=1)  # no properties set
    first = log.append_chunk(
        PREFIX,
        entries([data_section(b"a"), b"raw c", data_section(b"d")]),
        3,
        timestamp_ms=2,
        producer="p",
        first_id=10,
    )
    log.append(PREFIX + b"\x00\x00plain-4", timestamp_ms=3)
    assert (first, log.next_offset) == (1, 5)
    assert bodies(log) == [(0, b"plain-0"), (1, b"a"), (2, b"raw c"), (3, b"d"), (4, b"plain-4")]
    # a reader starting inside the chunk starts at its offset
    assert bodies(log, 2) == [(2, b"raw c"), (3, b"d"), (4, b"plain-4")]
    got = list(every_record(log.reader(1)))[:3]
    assert [(r.producer, r.publishing_id) for r in got] == [("p", 10), ("p", 11), ("p", 12)]
    raw = decode_stream_message(got[1].payload)[2]
    assert raw[2] == {RAW_HEADER: True} and raw[3] == 2  # marked raw, persistent
    assert decode_stream_message(got[0].payload)[2][2] is None
    # the record itself is flagged, and its payload ends in the osiris chunk as stored
    data = log.active_path.read_bytes()
    pos = HEADER.size + len(PREFIX) + 9  # past the first (plain) record
    nlen = HEADER.unpack_from(data, pos)[5]
    assert nlen == CHUNK_FLAG | 1
    log.close()
    reopened = StreamLog(tmp_path)
    assert reopened.next_offset == 5 and reopened.producers == {"p": 12}
    assert bodies(reopened) == bodies(log)


def test_plain_chunked_reads_expand_and_wire_reads_keep_the_record(tmp_path: Path) -> None:
    log = StreamLog(tmp_path)
    five = entries([data_section(b"%d" % i) for i in range(5)])
    log.append_chunk(PREFIX, five, 5, timestamp_ms=7)
    log.append(PREFIX + b"\x00\x00after", timestamp_ms=8)
    reader = log.reader(2)
    first, last, count, data = reader.next_chunk(1 << 20, 4)  # type: ignore[misc]
    reader.close()
    assert (first, last, count) == (2, 3, 2)
    assert [(o, b) for o, _ts, _ex, _rk, _p, b in records(data)] == [(2, b"2"), (3, b"3")]
    reader = log.reader(2)
    wire = reader.next_chunk(1 << 20, None, wire=True)
    reader.close()
    assert wire is not None
    first, last, count, data = wire
    assert (first, last, count) == (2, 5, 4)  # messages from 2; the whole record is there
    nlen = HEADER.unpack_from(data, 0)[5]
    assert nlen & CHUNK_FLAG
    at = HEADER.size + len(PREFIX)
    head = OSIRIS_HEADER.unpack_from(data, at)
    chunk_entries = data[at + OSIRIS_HEADER.size : 8 + HEADER.unpack_from(data, 0)[1]]
    assert head[2:4] == (5, 5) and head[4] == 7 and head[6] == 0  # counts, ts, first offset
    assert head[7] == zlib.crc32(chunk_entries) and head[8] == len(chunk_entries)


def test_a_duplicate_prefix_is_dropped_and_ids_go_on(tmp_path: Path) -> None:
    stream = DiskStream(tmp_path, {})
    body = entries([data_section(b"%d" % i) for i in range(1, 5)])
    assert stream.append_entries("", "s", body, timestamp_ms=1, producer="p", first_id=1) == 4
    again = entries([data_section(b"%d" % i) for i in range(3, 7)])
    assert stream.append_entries("", "s", again, timestamp_ms=2, producer="p", first_id=3) == 2
    assert stream.next_offset == 6 and stream.producers["p"] == 6
    reader = stream.reader(0)
    got = []
    while (record := reader.next()) is not None:
        got.append(record[5])
    reader.close()
    stream.close()
    assert got == [b"1", b"2", b"3", b"4", b"5", b"6"]


def test_retention_and_time_lookup_count_messages(tmp_path: Path) -> None:
    log = StreamLog(tmp_path, max_segment_bytes=2000, max_bytes=4000)
    for i in range(40):
        ten = entries([data_section(b"x" * 50)] * 10)
        log.append_chunk(PREFIX, ten, 10, timestamp_ms=1000 + i)
    assert log.next_offset == 400
    log.apply_retention()
    assert log.first_offset % 10 == 0 and log.first_offset > 0  # whole chunks went
    kept = bodies(log)
    assert [o for o, _ in kept] == list(range(log.first_offset, 400))
    assert log.offset_for_time(1039) == 390
    reader = log.reader(395)
    assert reader.next().offset == 395  # type: ignore[union-attr]
    reader.close()
    log.close()


def test_a_torn_chunk_is_dropped_whole(tmp_path: Path) -> None:
    log = StreamLog(tmp_path)
    log.append_chunk(PREFIX, entries([data_section(b"a")] * 3), 3, timestamp_ms=1)
    log.append_chunk(PREFIX, entries([data_section(b"b")] * 4), 4, timestamp_ms=2)
    log.close()
    path = log.active_path
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 5)  # the second chunk's write cut short
    reopened = StreamLog(tmp_path)
    assert reopened.next_offset == 3 and reopened.dropped_bytes > 0
    assert [b for _o, b in bodies(reopened)] == [b"a"] * 3


_WRITER = """
import struct, sys
from pathlib import Path
from roost.codecs.stream_message import message_prefix
from roost.store.stream_log import StreamLog
log = StreamLog(Path(sys.argv[1]))
u32 = struct.Struct(">I")
body = b"\\x00Su\\xa0\\x04" + b"data"
i = 0
while True:
    log.append_chunk(message_prefix("", "s"), (u32.pack(9) + body) * 7, 7, timestamp_ms=i,
                     producer="p", first_id=1 + 7 * i)
    i += 1
    if i == 50:
        print("ready", flush=True)
"""


def test_kill_9_mid_writes_keeps_only_whole_chunks(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    log = StreamLog(tmp_path)
    assert log.next_offset >= 350 and log.next_offset % 7 == 0
    got = list(every_record(log.reader(0)))
    assert [r.offset for r in got] == list(range(log.next_offset))
    assert [r.publishing_id for r in got] == list(range(1, log.next_offset + 1))
    assert log.producers == {"p": log.next_offset}
    log.close()


def test_a_flipped_byte_in_a_chunk_s_messages_ends_the_log_there(tmp_path: Path) -> None:
    """The record's CRC stops at the osiris header, whose CRC covers the messages:
    recovery checks both."""
    log = StreamLog(tmp_path)
    log.append_chunk(PREFIX, entries([data_section(b"a")] * 3), 3, timestamp_ms=1)
    log.append_chunk(PREFIX, entries([data_section(b"b")] * 4), 4, timestamp_ms=2)
    log.close()
    path = log.active_path
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # the last message's last byte
    path.write_bytes(bytes(data))
    reopened = StreamLog(tmp_path)
    assert reopened.next_offset == 3 and reopened.dropped_bytes > 0
    reopened.close()


def test_malformed_entries_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    """The entries publish is open to any client of the core (an AMQP publisher may set
    its content type): cut entries or an empty one are refused whole. (Any other AMQP
    1.0 message is kept as sent and mapped on reading: stream_chunk.map_amqp10_with.)"""
    stream = DiskStream(tmp_path, {})
    good = entries([data_section(b"ok")])
    for bad in (good[:-1], good + b"\x00\x00\x00\x00"):
        try:
            stream.append_entries("", "s", good + bad, timestamp_ms=1)
        except ValueError:
            pass
        else:
            raise AssertionError(f"accepted {bad!r}")
    assert stream.next_offset == 0
    stream.close()


def test_the_log_knows_where_its_last_chunk_starts_also_after_reopening(
    tmp_path: Path,
) -> None:
    """``last`` starts at the last chunk's first message (RabbitMQ 3.10 does so for
    AMQP and stream consumers): the log tracks that offset and recovery finds it again,
    also when the last record lies in the segment before an empty active one."""
    log = StreamLog(tmp_path, max_segment_bytes=300)
    log.append_chunk(PREFIX, entries([data_section(b"a%d" % i) for i in range(5)]), 5,
                     timestamp_ms=1)
    assert (log.last_chunk_offset, log.next_offset) == (0, 5)
    log.append_many(PREFIX, [b"\x00\x00p5", b"\x00\x00p6"], timestamp_ms=2)
    assert log.last_chunk_offset == 6  # plain records: each its own chunk
    log.append_chunk(PREFIX, entries([b"raw %d" % i for i in range(4)]), 4, timestamp_ms=3)
    assert (log.last_chunk_offset, log.next_offset) == (7, 11)
    log.close()
    log = StreamLog(tmp_path, max_segment_bytes=300)
    assert (log.last_chunk_offset, log.next_offset) == (7, 11)
    log.append(PREFIX + b"\x00\x00" + b"x" * 300, timestamp_ms=4)  # fills the segment
    log.append_chunk(PREFIX, entries([b"raw y", b"raw z"]), 2, timestamp_ms=5)  # rolls
    assert (log.last_chunk_offset, log.next_offset) == (12, 14)
    log._roll()  # an empty active segment: the last chunk is in the one before
    log.close()
    log = StreamLog(tmp_path, max_segment_bytes=300)
    assert (log.last_chunk_offset, log.next_offset, log.segments[-1].size) == (12, 14, 0)
    log.close()


def test_records_bigger_than_the_read_ahead_read_back_whole_from_any_start(
    tmp_path: Path,
) -> None:
    """A stream-protocol chunk of 500 1 KiB messages (~520 KB) is bigger than the reader's
    read-ahead, which ends inside it: the reader reads it again from its start (no join
    of the kept part and the rest). Every run, wire or expanded, from any start, is the
    bytes on disk."""
    from roost.store.stream_reader import READ_AHEAD

    log = StreamLog(tmp_path)
    log.append(PREFIX + b"\x00\x00small", timestamp_ms=1)
    bodies_in = [bytes([65 + i % 26]) * 1024 for i in range(500)]
    for n in range(3):
        log.append_chunk(PREFIX, entries([b"\x00Su\xb0" + _U32.pack(1024) + b for b in bodies_in]),
                         500, timestamp_ms=2 + n)
    log.append(PREFIX + b"\x00\x00tail", timestamp_ms=9)
    disk = log.active_path.read_bytes()
    big = 8 + HEADER.unpack_from(disk, HEADER.size + len(PREFIX) + 7)[1]
    assert big > READ_AHEAD
    reader = log.reader(0)
    runs = []
    while (run := reader.next_chunk(256 * 1024, None, wire=True)) is not None:
        runs.append(run)
    reader.close()
    assert [(r[0], r[1], r[2]) for r in runs] == [
        (0, 0, 1), (1, 500, 500), (501, 1000, 500), (1001, 1500, 500), (1501, 1501, 1)]
    assert b"".join(r[3] for r in runs) == disk  # every byte once, in order
    assert [len(r[3]) for r in runs[1:4]] == [big] * 3
    # a reader starting inside the second chunk, and plain (expanded) reads
    reader = log.reader(700)
    run = reader.next_chunk(256 * 1024, None, wire=True)
    reader.close()
    assert run is not None and run[:3] == (700, 1000, 301) and len(run[3]) == big
    got = bodies(log, 495)
    assert [o for o, _b in got] == list(range(495, 1502))
    assert [b for _o, b in got[:-1]] == bodies_in[494:] + bodies_in * 2  # offset 0: "small"
    assert got[-1] == (1501, b"tail")
