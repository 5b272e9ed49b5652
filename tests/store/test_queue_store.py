"""The per-queue segment store: append, remove, recover, damage, segment GC, ack log."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.store import fsync as fsync_module
from roost.store.hub import DiskStore
from roost.store.queue_store import ACK, ACK_FILE, QueueStore

PROPS: tuple[Any, ...] = (None, None, {"h": 1}, 2) + (None,) * 10


def make(tmp: Path, **kw: Any) -> tuple[DiskStore, QueueStore]:
    hub = DiskStore(tmp, **kw)
    return hub, hub.open_queue("/", "q")


def reopen(tmp: Path, **kw: Any) -> tuple[QueueStore, list[tuple[Any, bool]]]:
    hub = DiskStore(tmp, **kw)
    store = hub.open_queue("/", "q")
    found: list[tuple[int, int, bool]] = []
    store.recover(lambda seq, size, delivered, _expires: found.append((seq, size, delivered)))
    got: list[tuple[Any, bool]] = []
    for seq, size, delivered in found:
        msg = store.read(seq)
        assert size == len(msg[5])
        got.append((msg, delivered))
    return store, got


def bodies(got: list[tuple[Any, bool]]) -> list[bytes]:
    return [msg[5] for msg, _ in got]


def segments(store: QueueStore) -> list[Path]:
    return sorted(store.dir.glob("*.seg"))


def test_append_recover_in_order(tmp_path: Path) -> None:
    hub, store = make(tmp_path)
    seqs = [store.append("ex", f"k{i}", PROPS, b"body%d" % i) for i in range(50)]
    hub.sync_now()
    store2, got = reopen(tmp_path)
    assert bodies(got) == [b"body%d" % i for i in range(50)]
    assert got[3][0][:5] == (seqs[3], False, "ex", "k3", PROPS)
    assert store2.count == 50


def test_expiries_come_back_from_recovery(tmp_path: Path) -> None:
    hub, store = make(tmp_path)
    store.append("ex", "k", PROPS, b"ttl", expires_ms=1_800_000_000_123)
    store.append("ex", "k", PROPS, b"none")
    hub.sync_now()
    store2 = DiskStore(tmp_path).open_queue("/", "q")
    found: list[tuple[int, int]] = []
    store2.recover(lambda seq, _size, _delivered, expires: found.append((seq, expires)))
    assert [expires for _, expires in found] == [1_800_000_000_123, 0]
    assert store2.read(found[0][0])[5] == b"ttl"


def test_acked_do_not_come_back_and_delivered_are_marked(tmp_path: Path) -> None:
    hub, store = make(tmp_path)
    seqs = [store.append("", "q", PROPS, b"%d" % i) for i in range(10)]
    for seq in seqs[:4]:
        store.remove(seq)
    store.remove(seqs[7])
    store.mark_delivered(seqs[5])
    hub.sync_now()
    _, got = reopen(tmp_path)
    assert bodies(got) == [b"4", b"5", b"6", b"8", b"9"]
    assert [d for _, d in got] == [False, True, False, False, False]


def test_segments_roll_and_are_deleted_when_unreferenced(tmp_path: Path) -> None:
    hub, store = make(tmp_path, segment_size=4096)
    seqs = [store.append("", "q", PROPS, b"x" * 500) for _ in range(40)]
    hub.sync_now()
    assert len(segments(store)) >= 5
    for seq in seqs:
        store.remove(seq)
    hub.sync_now()
    assert segments(store) == []
    assert hub.bytes_on_disk == (store.dir / ACK_FILE).stat().st_size


def test_new_seqs_after_full_drain_and_restart_are_not_treated_as_acked(tmp_path: Path) -> None:
    hub, store = make(tmp_path, segment_size=4096)
    for seq in [store.append("", "q", PROPS, b"a") for _ in range(5)]:
        store.remove(seq)
    hub.sync_now()
    store2, got = reopen(tmp_path)
    assert got == []
    store2.append("", "q", PROPS, b"new")
    store2.hub.sync_now()
    _, got = reopen(tmp_path)
    assert bodies(got) == [b"new"]


def test_torn_tail_dropped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hub, store = make(tmp_path)
    for i in range(5):
        store.append("", "q", PROPS, b"m%d" % i)
    hub.sync_now()
    seg = segments(store)[-1]
    with seg.open("r+b") as fh:
        fh.truncate(seg.stat().st_size - 3)
    with caplog.at_level(logging.WARNING, "roost.store"):
        _, got = reopen(tmp_path)
    assert bodies(got) == [b"m0", b"m1", b"m2", b"m3"]
    assert "torn tail" in caplog.text


def test_flipped_byte_drops_that_record_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub, store = make(tmp_path)
    for i in range(5):
        store.append("", "q", PROPS, b"m%d" % i)
    hub.sync_now()
    seg = segments(store)[-1]
    data = bytearray(seg.read_bytes())
    record = len(data) // 5
    data[2 * record + record // 2] ^= 0xFF  # inside the third record's payload
    seg.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, "roost.store"):
        _, got = reopen(tmp_path)
    assert bodies(got) == [b"m0", b"m1", b"m3", b"m4"]
    assert "bad checksum" in caplog.text


@pytest.mark.parametrize("byte", [0, 1, 2, 3, 4, 7])  # the length field, then the crc
def test_damaged_record_header_costs_that_record_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, byte: int
) -> None:
    """A flipped byte in a middle record's header: the scan resynchronises on the next
    intact record instead of dropping the rest of the segment as a torn tail."""
    hub, store = make(tmp_path)
    for i in range(9):
        store.append("", "q", PROPS, b"m%d" % i)
    hub.sync_now()
    seg = segments(store)[-1]
    data = bytearray(seg.read_bytes())
    record = len(data) // 9  # equal-sized records
    data[4 * record + byte] ^= 0x40
    seg.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, "roost.store"):
        _, got = reopen(tmp_path)
    assert bodies(got) == [b"m%d" % i for i in range(9) if i != 4]
    dropped = [r for r in caplog.records if "bytes dropped" in r.getMessage()]
    assert len(dropped) == 1, caplog.text  # one warning for the one damaged region
    assert f"@{4 * record} bad checksum or header, {record} bytes dropped" in caplog.text
    assert "torn tail" not in caplog.text


def test_resync_skips_a_damaged_region_spanning_records(tmp_path: Path) -> None:
    """Garbage over three records (headers included) in a bigger segment: one region."""
    hub, store = make(tmp_path)
    for i in range(40):
        store.append("", "q", PROPS, b"%02d" % i + b"z" * 200)
    hub.sync_now()
    seg = segments(store)[-1]
    data = bytearray(seg.read_bytes())
    record = len(data) // 40
    start = 10 * record + 5
    data[start : start + 2 * record + 7] = os.urandom(2 * record + 7)
    seg.write_bytes(bytes(data))
    _, got = reopen(tmp_path)
    assert [b[:2] for b in bodies(got)] == [b"%02d" % i for i in range(40) if i not in (10, 11, 12)]


def test_scan_reports_regions_and_the_torn_tail() -> None:
    from roost.store.segment import ScanResult, frame, scan

    records = [frame(b"record %d" % i) for i in range(5)]
    data = bytearray(b"".join(records))
    data[len(records[0]) + 1] ^= 0xFF  # the second record's length
    data += records[0][:6]  # and a torn tail
    result = ScanResult()
    got = [bytes(p) for _, p in scan(bytes(data), result)]
    assert got == [b"record %d" % i for i in (0, 2, 3, 4)]
    assert result.dropped == [(len(records[0]), len(records[1]))]
    assert result.torn_tail == 6
    assert result.valid_end == len(data) - 6


def test_truncated_ack_file_keeps_the_intact_acks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hub, store = make(tmp_path)
    seqs = [store.append("", "q", PROPS, b"%d" % i) for i in range(4)]
    store.remove(seqs[0])
    store.remove(seqs[1])
    hub.sync_now()
    acks = store.dir / ACK_FILE
    with acks.open("r+b") as fh:
        fh.truncate(acks.stat().st_size - 5)
    with caplog.at_level(logging.WARNING, "roost.store"):
        _, got = reopen(tmp_path)
    assert bodies(got) == [b"1", b"2", b"3"]  # the torn ack is lost: at-least-once
    assert "acks torn tail" in caplog.text


def test_missing_directory_is_an_empty_queue(tmp_path: Path) -> None:
    _, got = reopen(tmp_path)
    assert got == []


def test_garbage_file_never_crashes(tmp_path: Path) -> None:
    hub, store = make(tmp_path)
    store.append("", "q", PROPS, b"ok")
    hub.sync_now()
    (store.dir / "00000099.seg").write_bytes(os.urandom(1000))
    (store.dir / ACK_FILE).write_bytes(os.urandom(37))
    _, got = reopen(tmp_path)
    assert b"ok" in bodies(got)


def test_ack_log_compaction_keeps_state(tmp_path: Path) -> None:
    hub, store = make(tmp_path, ack_compact_bytes=600)
    seqs = [store.append("", "q", PROPS, b"%d" % i) for i in range(200)]
    gone = [*range(100), *range(100, 150, 2)]
    for i in gone:
        store.remove(seqs[i])
        hub.sync_now()
    store.mark_delivered(seqs[151])
    hub.sync_now()
    # uncompacted: one 12-byte entry per ack; compacted: a floor, the holes, the mark
    assert (store.dir / ACK_FILE).stat().st_size < 600
    _, got = reopen(tmp_path)
    expected = [b"%d" % i for i in range(200) if i not in gone]
    assert bodies(got) == expected
    assert [d for m, d in got if m[5] == b"151"] == [True]


def test_a_message_held_at_the_head_keeps_the_ack_log_small(tmp_path: Path) -> None:
    """One message delivered and never acked while 10,000 pass behind it (a long Celery
    task): the compacted log holds a range for the run of acks, not an entry per ack, so
    it is not rewritten in full at every commit, and recovery keeps exactly the held
    message and the one queued after the run."""
    hub, store = make(tmp_path, ack_compact_bytes=4096)
    held = store.append("", "q", PROPS, b"held")
    store.mark_delivered(held)
    hub.sync_now()
    for _ in range(20):
        for seq in [store.append("", "q", PROPS, b"x") for _ in range(500)]:
            store.mark_delivered(seq)
            store.remove(seq)
        hub.sync_now()
    store.append("", "q", PROPS, b"tail")
    hub.sync_now()
    # an entry per ack would be 120,000 bytes once compacted
    assert (store.dir / ACK_FILE).stat().st_size <= 2 * 4096
    _, got = reopen(tmp_path)
    assert [(msg[5], delivered) for msg, delivered in got] == [(b"held", True), (b"tail", False)]


def test_appends_after_recovering_an_acked_tail_get_their_own_slots(tmp_path: Path) -> None:
    hub, store = make(tmp_path)
    seqs = [store.append("", "q", PROPS, body) for body in (b"a", b"b", b"c")]
    hub.sync_now()
    store.remove(seqs[2])
    hub.sync_now()
    again, got = reopen(tmp_path)
    assert bodies(got) == [b"a", b"b"]
    new = again.append("", "q", PROPS, b"new")
    assert new > seqs[2] and again.read(new)[5] == b"new"
    again.remove(new)
    assert again.read(seqs[1])[5] == b"b" and again.count == 2


def test_a_drained_queue_keeps_a_floor_not_its_ack_log(tmp_path: Path) -> None:
    hub, store = make(tmp_path, ack_compact_bytes=16 * 1024)
    seqs = [store.append("", "q", PROPS, b"x") for _ in range(1000)]
    hub.sync_now()
    for seq in seqs:
        store.mark_delivered(seq)
        store.remove(seq)
    hub.sync_now()
    assert (store.dir / ACK_FILE).stat().st_size == ACK.size  # the floor alone
    again, got = reopen(tmp_path)
    assert got == [] and again.append("", "q", PROPS, b"next") > 1000  # numbering goes on


def test_a_new_queue_directory_is_synced_all_the_way_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power cut after the first confirm must find the queue's directory: the entry of
    each directory made on the way (vhosts/, the vhost's, queues/, the queue's) is in a
    parent that was fsynced."""
    synced: list[Path] = []
    monkeypatch.setattr(fsync_module, "fsync_path", synced.append)
    hub, store = make(tmp_path)
    store.append("", "q", PROPS, b"first")
    hub.sync_now()
    made = [store.dir, *store.dir.parents]
    assert set(made[: made.index(tmp_path) + 1]) <= set(synced)


def test_read_from_buffer_and_from_disk(tmp_path: Path) -> None:
    hub, store = make(tmp_path)
    a = store.append("", "q", PROPS, b"first")
    assert store.read(a)[5] == b"first"
    hub.sync_now()
    assert store.read(a)[5] == b"first"


def test_file_descriptors_are_bounded(tmp_path: Path) -> None:
    hub = DiskStore(tmp_path, max_open=8)
    stores = [hub.open_queue("/", f"q{i}") for i in range(50)]
    for s in stores:
        s.append("", "q", PROPS, b"x")
    hub.sync_now()
    assert hub.files.open_count <= 8
    for s in stores:
        assert s.read(1)[5] == b"x"
    assert hub.files.open_count <= 8
    hub.files.close_all()


def test_idle_descriptors_are_closed(tmp_path: Path) -> None:
    """close_idle closes what was not used since the previous call, and only that."""
    hub = DiskStore(tmp_path, max_open=8)
    busy, idle = hub.open_queue("/", "busy"), hub.open_queue("/", "idle")
    busy.append("", "q", PROPS, b"x")
    idle.append("", "q", PROPS, b"y")
    hub.sync_now()
    assert hub.files.open_count == 2
    hub.files.close_idle()  # both were used in the period that ends here
    assert hub.files.open_count == 2
    assert busy.read(1)[5] == b"x"
    hub.files.close_idle()  # idle was not used since: closed; busy was: kept
    assert hub.files.open_count == 1
    hub.files.close_idle()
    assert hub.files.open_count == 0
    assert idle.read(1)[5] == b"y"  # reopened on demand
    hub.files.close_all()


OPS = st.lists(st.tuples(st.sampled_from("aard"), st.integers(0, 30)), max_size=60)


def _run_model(
    hub: DiskStore,
    store: QueueStore,
    ops: list[tuple[str, int]],
    live: dict[int, bytes],
    delivered: set[int],
) -> None:
    for op, arg in ops:
        if op == "a":
            body = b"b%d" % len(live) * (arg + 1)
            live[store.append("", "q", PROPS, body)] = body
        elif live:
            seq = sorted(live)[arg % len(live)]
            if op == "r":
                store.remove(seq)
                del live[seq]
                delivered.discard(seq)
            else:
                store.mark_delivered(seq)
                delivered.add(seq)
        if arg % 7 == 0:
            hub.sync_now()
    hub.sync_now()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(runs=st.lists(OPS, min_size=1, max_size=3))
def test_model(tmp_path_factory: pytest.TempPathFactory, runs: list[list[tuple[str, int]]]) -> None:
    """Any mix of appends, removes and delivered marks recovers to the model's state, and
    the recovered store takes more of them (then recovers again) just as well."""
    tmp = tmp_path_factory.mktemp("model")
    hub, store = make(tmp, segment_size=4096, ack_compact_bytes=200)
    live: dict[int, bytes] = {}
    delivered: set[int] = set()
    for ops in runs:
        _run_model(hub, store, ops, live, delivered)
        store, got = reopen(tmp, segment_size=4096, ack_compact_bytes=200)
        hub = store.hub
        assert [(m[0], m[5], d) for m, d in got] == [
            (s, live[s], s in delivered) for s in sorted(live)
        ]


def test_orphan_directories_are_moved_to_lost_and_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A queue directory no durable queue claims is kept (moved aside, named in the log),
    never deleted: its definition may have been lost to damage."""
    hub, store = make(tmp_path)
    store.append("", "q", PROPS, b"x")
    hub.sync_now()
    fresh = DiskStore(tmp_path)
    kept = fresh.open_queue("/", "other")
    with caplog.at_level(logging.WARNING, "roost.store"):
        moved = fresh.quarantine_orphans()
    assert len(moved) == 1 and moved[0].parts[-6] == "lost+found"
    assert not store.dir.exists()
    assert sorted(p.name for p in moved[0].iterdir()) == ["00000001.seg", "owner.json"]
    assert "queue 'q' in vhost '/'" in caplog.text and str(moved[0]) in caplog.text
    assert kept.dir.parent.exists()


def test_a_record_behind_a_gap_nothing_explains_is_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A well-formed record two billion numbers past the last (a foreign or garbage file
    whose checksum passes): the index would need a slot for each number skipped, and no
    ack or record on disk accounts for them, so it is dropped with a warning, and the
    numbering goes on from what is kept."""
    from roost.store.codec import encode_message
    from roost.store.segment import frame

    hub, store = make(tmp_path)
    store.append("", "q", PROPS, b"good")
    hub.sync_now()
    far = 2**31
    (store.dir / "00000008.seg").write_bytes(
        frame(encode_message(far, "", "q", PROPS, b"stray", False, False, 0))
    )
    with caplog.at_level(logging.WARNING, "roost.store"):
        again, got = reopen(tmp_path)
    assert bodies(got) == [b"good"]
    assert f"record with seq {far} dropped" in caplog.text
    assert again.append("", "q", PROPS, b"next") < 100
    assert sum(len(seg.gone) for seg in again._segs) < 100  # no bitmap over the gap


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    garbage=st.binary(max_size=400),
    payloads=st.lists(st.binary(max_size=60), max_size=5),
    acks=st.binary(max_size=50),
)
def test_recovery_never_raises_on_damaged_files(
    tmp_path_factory: pytest.TempPathFactory, garbage: bytes, payloads: list[bytes], acks: bytes
) -> None:
    """Raw garbage, and well-framed records whose payloads are garbage (checksums pass):
    recovery drops what it cannot read and never raises."""
    from roost.store.segment import frame

    tmp = tmp_path_factory.mktemp("fuzz")
    hub, store = make(tmp)
    store.append("", "q", PROPS, b"good")
    hub.sync_now()
    (store.dir / "00000007.seg").write_bytes(garbage)
    (store.dir / "00000008.seg").write_bytes(b"".join(frame(p) for p in payloads))
    with (store.dir / ACK_FILE).open("ab") as fh:
        fh.write(acks)
    _, got = reopen(tmp)
    assert all(isinstance(m[5], bytes) for m, _ in got)
