"""The store's contract: what the core relies on from every implementation of the
Protocols of ``core.durability``, run against the disk store and its in-memory twin alike
(as nats-server runs its store tests over the file store and the memory store). What only
the disk store does (recovery after a restart, damage, fsync) has its own tests beside
this file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from roost.codecs.stream_message import batch_entry, decode_stream_message
from roost.core.durability import DefinitionsStore, MessageStore, StreamStorage, StreamStore
from roost.store.definitions import DefinitionsFile
from roost.store.hub import DiskStore
from roost.store.memory import MemoryDefinitions, MemoryStore
from roost.store.memory_streams import MemoryStreams
from roost.store.stream_segment import HEADER
from roost.store.stream_store import StreamFiles

PROPS: tuple[Any, ...] = (None, None, {"h": 1}, 2) + (None,) * 10


@dataclass
class Stores:
    messages: MessageStore
    definitions: DefinitionsStore
    streams: StreamStorage
    commit: Callable[[], None]  # what a group commit does (nothing in memory)
    opened: list[StreamStore]


@pytest.fixture(params=["disk", "memory"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "memory":
        yield Stores(MemoryStore(), MemoryDefinitions(), MemoryStreams(), lambda: None, [])
        return
    disk = DiskStore(tmp_path, fsync="never")
    stores = Stores(disk, DefinitionsFile(tmp_path), StreamFiles(tmp_path), disk.flush, [])
    yield stores
    for stream in stores.opened:
        stream.close()
    disk.files.close_all()


def open_stream(stores: Stores, name: str = "s") -> StreamStore:
    stream = stores.streams.open_stream(
        "/", name, {}, max_segment_bytes=1 << 20, max_bytes=0, max_age_ms=0
    )
    stores.opened.append(stream)
    return stream


# -- queue stores -------------------------------------------------------------------------


def test_a_queue_store_reads_back_what_it_took(stores: Stores) -> None:
    q = stores.messages.open_queue("/", "q")
    seqs = [q.append("ex", f"k{i}", PROPS, b"body%d" % i) for i in range(3)]
    assert seqs == sorted(seqs) and seqs[0] > 0 and len(set(seqs)) == 3
    assert q.count == 3
    stores.commit()
    seq, redelivered, exchange, key, props, body = q.read(seqs[1])
    assert (seq, redelivered, exchange, key, props, body) == (
        seqs[1], False, "ex", "k1", PROPS, b"body1"
    )


def test_a_removed_message_is_gone_and_counted_out(stores: Stores) -> None:
    q = stores.messages.open_queue("/", "q")
    first, second = q.append("", "q", PROPS, b"a"), q.append("", "q", PROPS, b"b")
    q.remove(first)
    stores.commit()
    assert q.count == 1
    with pytest.raises(KeyError):
        q.read(first)
    assert q.read(second)[5] == b"b"


def test_a_redelivered_append_reads_back_redelivered(stores: Stores) -> None:
    q = stores.messages.open_queue("/", "q")
    seq = q.append("", "q", PROPS, b"again", redelivered=True)
    stores.commit()
    assert q.read(seq)[1] is True


def test_queue_stores_are_separate(stores: Stores) -> None:
    a, b = stores.messages.open_queue("/", "a"), stores.messages.open_queue("/", "b")
    seq = a.append("", "a", PROPS, b"only in a")
    b.append("", "b", PROPS, b"only in b")
    a.destroy()
    stores.commit()
    assert b.count == 1 and b.read(seq if seq == 1 else 1)[5] == b"only in b"


# -- delayed messages ----------------------------------------------------------------------


def test_a_delayed_store_holds_until_removed(stores: Stores) -> None:
    d = stores.messages.open_delayed("/", "dx")
    first = d.add(1000, "k1", PROPS, b"one")
    second = d.add(2000, "k2", PROPS, b"two")
    d.remove(first)
    stores.commit()
    assert [(due, key, body) for _slot, due, key, _p, body in d.recover()] == [
        (2000, "k2", b"two")
    ]
    assert second != first


# -- definitions ---------------------------------------------------------------------------


def test_definitions_come_back_as_snapshot_plus_journal(stores: Stores) -> None:
    defs = stores.definitions
    assert defs.load() is None  # a first start
    defs.save({"vhosts": [{"name": "/"}]})
    defs.append([{"s": "queues", "k": ["/", "q"], "v": {"name": "q", "vhost": "/"}}])
    stores.commit()
    loaded = defs.load()
    assert loaded is not None
    base, records = loaded
    assert base == {"vhosts": [{"name": "/"}]}
    assert [r["k"] for r in records] == [["/", "q"]]
    assert defs.journal_size > 0
    defs.save({"vhosts": []})
    assert defs.load() == ({"vhosts": []}, [])


# -- streams -------------------------------------------------------------------------------


def test_a_stream_reads_back_in_offset_order(stores: Stores) -> None:
    s = open_stream(stores)
    offsets = [s.append("ex", "k", PROPS, b"m%d" % i, timestamp_ms=1000 + i) for i in range(5)]
    assert offsets == [0, 1, 2, 3, 4] and (s.first_offset, s.next_offset) == (0, 5)
    assert (s.first_timestamp, s.last_timestamp) == (1000, 1004)
    cursor = s.reader(2)
    got = [cursor.next() for _ in range(3)]
    assert [(r[0], r[1], r[5]) for r in got if r is not None] == [
        (2, 1002, b"m2"), (3, 1003, b"m3"), (4, 1004, b"m4")
    ]
    assert got[0] is not None and got[0][4] == PROPS
    assert cursor.next() is None and cursor.offset == 5
    s.append("ex", "k", PROPS, b"late", timestamp_ms=2000)
    late = cursor.next()
    assert late is not None and late[5] == b"late"  # readable at once
    cursor.close()


def test_a_chunk_is_whole_records_in_the_log_format(stores: Stores) -> None:
    s = open_stream(stores)
    for i in range(10):
        s.append("ex", "key", PROPS, b"x" * 100 + bytes([i]), timestamp_ms=7, producer="p",
                 publishing_id=i + 1)  # fmt: skip
    cursor = s.reader(3)
    chunk = cursor.next_chunk(400, None)
    assert chunk is not None
    first, last, count, data = chunk
    assert (first, count) == (3, last - first + 1) and 1 <= count < 7
    pos, seen = 0, []
    while pos < len(data):
        _crc, length, offset, ts, pid, name_len = HEADER.unpack_from(data, pos)
        start = pos + HEADER.size
        name = data[start : start + name_len]
        payload = data[start + name_len : pos + 8 + length]
        exchange, key, _props, body = decode_stream_message(payload)
        seen.append((offset, ts, pid, name, exchange, key, body[-1]))
        pos += 8 + length
    assert seen == [(o, 7, o + 1, b"p", "ex", "key", o) for o in range(first, last + 1)]
    rest = cursor.next_chunk(1 << 20, 8)  # up to offset 8 only
    assert rest is not None and (rest[0], rest[1]) == (last + 1, 7)
    cursor.close()


def test_producers_deduplicate_and_batches_skip_what_is_stored(stores: Stores) -> None:
    s = open_stream(stores)
    s.append("", "s", PROPS, b"a", timestamp_ms=1, producer="p", publishing_id=5)
    assert s.producers == {"p": 5}
    assert s.is_duplicate("p", 5) and s.is_duplicate("p", 4) and not s.is_duplicate("p", 6)
    assert not s.is_duplicate("other", 1)
    batch = b"".join(batch_entry(PROPS, b"b%d" % i) for i in range(4))  # ids 4, 5, 6, 7
    assert s.append_batch("", "s", batch, timestamp_ms=2, producer="p", first_id=4) == 2
    assert s.producers["p"] == 7
    cursor = s.reader(0)
    bodies = []
    while (record := cursor.next()) is not None:
        bodies.append(record[5])
    cursor.close()
    assert bodies == [b"a", b"b2", b"b3"]
    with pytest.raises(ValueError):
        s.append_batch("", "s", b"\x00\x00\x00\xff", timestamp_ms=3)
    assert s.next_offset == 3  # nothing of a malformed batch is kept


def test_a_cursor_tells_each_records_producer_and_publishing_id(stores: Stores) -> None:
    """What a replicated stream's leader ships so its members deduplicate after it."""
    s = open_stream(stores)
    s.append("", "s", PROPS, b"a", timestamp_ms=1, producer="p", publishing_id=5)
    s.append("", "s", PROPS, b"anonymous", timestamp_ms=1)
    batch = b"".join(batch_entry(PROPS, b"b%d" % i) for i in range(3))  # ids 6, 7, 8
    s.append_batch("", "s", batch, timestamp_ms=2, producer="q", first_id=6)
    cursor = s.reader(1)
    tagged = []
    while (found := cursor.next_tagged()) is not None:
        record, producer, publishing_id = found
        tagged.append((record[0], record[5], producer, publishing_id))
    cursor.close()
    assert tagged == [
        (1, b"anonymous", "", 0), (2, b"b0", "q", 6), (3, b"b1", "q", 7), (4, b"b2", "q", 8)
    ]


def test_stored_offsets_and_time_lookups(stores: Stores) -> None:
    s = open_stream(stores)
    for i in range(4):
        s.append("", "s", PROPS, b"x", timestamp_ms=100 * (i + 1))
    assert s.stored_offset("reader") is None
    s.store_offset("reader", 2)
    s.store_offset("reader", 3)
    assert s.stored_offset("reader") == 3
    assert [s.offset_for_time(t) for t in (0, 100, 150, 400, 500)] == [0, 0, 1, 3, 4]


def test_streams_are_separate_and_destroy_forgets(stores: Stores) -> None:
    a, b = open_stream(stores, "a"), open_stream(stores, "b")
    a.append("", "a", PROPS, b"in a", timestamp_ms=1)
    assert b.next_offset == 0
    a.destroy()
    again = open_stream(stores, "a")
    assert again.next_offset == 0
