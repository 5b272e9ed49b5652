"""A quorum queue member 20,000 messages behind catches up, and once the leader is killed
it and the other member serve everything confirmed (the long version, 100,000 behind:
``bench/quorum_catchup.py``)."""

from __future__ import annotations

from pathlib import Path

from roost.cluster.etcd_server import EtcdServer
from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.quorum.follower import Follower
from roost.store.memory import MemoryStore
from tests.cluster import catchup
from tests.quorum_links import Wire, batch, enq


def test_a_follower_20000_behind_catches_up_and_serves_everything_confirmed_after_the_leader_dies(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    fig = catchup.run(shared_etcd, etcd_prefix, tmp_path, behind=20_000, catch_up_within=30)
    print(f"\n{fig}")
    assert fig.problems == [], fig.problems
    assert fig.delivered >= 20_010 + fig.live and fig.live > 0


def test_a_snapshot_in_chunks_is_acknowledged_only_at_its_last_chunk() -> None:
    """Sans-IO: RESET..MORE, SNAP..MORE, SNAP: ``upto`` is acked once, at the end; a
    batch or another snapshot's chunk in between is refused."""
    wire = Wire()
    follower = Follower(MemoryStore(), "/", "q")
    follower.receive(wire, batch(5, 0, r.mark(r.RESET, 0)))  # type: ignore[arg-type]
    follower.receive(wire, batch(5, 1, enq(1)))  # type: ignore[arg-type]
    follower.receive(wire, batch(5, 0, r.mark(r.RESET, 40), enq(7), r.mark(r.MORE, 40)))  # type: ignore[arg-type]
    follower.receive(wire, batch(5, 41, enq(8)))  # type: ignore[arg-type]
    follower.receive(wire, batch(5, 0, r.snap(39, 1), enq(9)))  # type: ignore[arg-type]
    follower.receive(wire, batch(5, 0, r.snap(40, 2), enq(9)))  # type: ignore[arg-type]
    follower.receive(wire, batch(5, 0, r.snap(40, 1), enq(10), r.mark(r.MORE, 40)))  # type: ignore[arg-type]
    assert list(follower.held) == [7, 10]  # the older copy dropped, nothing refused applied
    answers = [(a.durable_index, a.ok) for a in wire.sent if isinstance(a, f.ReplicateAck)]
    # no ack of 40 before the end; another snapshot's chunk, or one after a lost one: refused
    assert answers == [(0, True), (1, True), (0, False), (0, False), (0, False)]
    follower.receive(wire, batch(5, 0, r.snap(40, 2), enq(11)))  # type: ignore[arg-type]
    follower.receive(wire, batch(5, 41, r.mark(r.DEL, 7)))  # type: ignore[arg-type]
    assert list(follower.held) == [10, 11]
    answers = [(a.durable_index, a.ok) for a in wire.sent if isinstance(a, f.ReplicateAck)]
    assert answers[5:] == [(40, True), (41, True)]


def test_no_snapshot_chunk_passes_for_a_streams_first_batch() -> None:
    """StreamGroups takes a Replicate of a queue it does not lead or follow whose first
    record is a stream's SYNC or OFS; a quorum frame must never open with either, or a
    catching-up member loses every chunk after the first and never comes in sync."""
    from roost.cluster.quorum.stream_leader import OFS, SYNC

    openers = [enq(1), r.delivered(1, 2), r.mark(r.DEL, 1), r.mark(r.RESET, 9)]
    openers.append(r.snap(9, 1))
    assert {raw[:1] for raw in openers}.isdisjoint({SYNC, OFS})
    follower = Follower(MemoryStore(), "/", "q")  # and a chunk's upto is no message number
    follower.receive(Wire(), batch(5, 0, r.mark(r.RESET, 90), enq(7), r.mark(r.MORE, 90)))  # type: ignore[arg-type]
    follower.receive(Wire(), batch(5, 0, r.snap(90, 1), enq(8)))  # type: ignore[arg-type]
    assert follower.max_seq == 8
