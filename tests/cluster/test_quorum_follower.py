"""A member's copy of a replicated queue, sans-IO over the memory store: the records it
applies, and the fencing (a batch of an older term, or one that leaves a gap, is refused
and changes nothing)."""

from __future__ import annotations

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.quorum.follower import Follower
from roost.store.memory import MemoryStore
from tests.quorum_links import Wire, batch, enq


def synced(term: int) -> Follower:
    """A member that took term ``term``'s first snapshot (empty, log index 0), as every
    member does before that term's batches."""
    follower = Follower(MemoryStore(), "/", "q")
    follower.receive(Wire(), batch(term, 0, r.mark(r.RESET, 0)))  # type: ignore[arg-type]
    return follower


def test_records_are_applied_and_acknowledged_once_durable() -> None:
    wire = Wire()
    follower = synced(7)
    follower.receive(wire, batch(7, 1, enq(1), enq(2), r.mark(r.DLV, 1)))  # type: ignore[arg-type]
    follower.receive(wire, batch(7, 4, r.mark(r.DEL, 2)))  # type: ignore[arg-type]
    assert list(follower.held) == [1]
    assert follower.held[1][2] == 1  # delivered once: redelivered after a failover
    acks = [a for a in wire.sent if isinstance(a, f.ReplicateAck)]
    assert [(a.term, a.durable_index, a.ok) for a in acks] == [(7, 3, True), (7, 4, True)]


def test_an_older_term_is_refused_and_changes_nothing() -> None:
    wire = Wire()
    follower = synced(9)
    follower.receive(wire, batch(9, 1, enq(1)))  # type: ignore[arg-type]
    follower.receive(wire, batch(8, 2, enq(2), r.mark(r.DEL, 1)))  # type: ignore[arg-type]
    assert list(follower.held) == [1]
    last = wire.sent[-1]
    assert isinstance(last, f.ReplicateAck)
    assert (last.term, last.ok) == (9, False)  # the deposed leader learns the newer term


def test_a_gap_is_refused_and_a_snapshot_replaces_the_copy() -> None:
    wire = Wire()
    follower = synced(3)
    follower.receive(wire, batch(3, 1, enq(1)))  # type: ignore[arg-type]
    follower.receive(wire, batch(3, 5, enq(5)))  # type: ignore[arg-type]
    assert list(follower.held) == [1] and wire.sent[-1].ok is False  # type: ignore[union-attr]
    follower.receive(wire, batch(3, 0, r.mark(r.RESET, 9), enq(4), enq(6)))  # type: ignore[arg-type]
    assert list(follower.held) == [4, 6]
    assert follower.last_index == 9
    follower.receive(wire, batch(3, 10, enq(7)))  # type: ignore[arg-type]
    assert list(follower.held) == [4, 6, 7]


def test_the_term_of_a_vanished_leader_is_refused_before_the_new_one_speaks() -> None:
    """A leader paused past its lease resumes and sends a snapshot (even a RESET) before
    the new leader's first batch reached this member: refused, and told of a newer term."""
    wire = Wire()
    follower = synced(5)
    follower.receive(wire, batch(5, 1, enq(1)))  # type: ignore[arg-type]
    follower.fence = 5  # the manager saw term 5's election key vanish
    follower.receive(wire, batch(5, 0, r.mark(r.RESET, 3), enq(8)))  # type: ignore[arg-type]
    assert list(follower.held) == [1]
    last = wire.sent[-1]
    assert isinstance(last, f.ReplicateAck)
    assert last.ok is False and last.term > 5  # the old leader stands down


def test_delivery_counts_are_kept() -> None:
    wire = Wire()
    follower = synced(2)
    follower.receive(wire, batch(2, 1, enq(1), r.delivered(1, 1), r.delivered(1, 3)))  # type: ignore[arg-type]
    assert follower.held[1][2] == 3
    snapshot = r.enq(2, 7, "", "q", b"\x00\x00", b"x")
    follower.receive(wire, batch(2, 0, r.mark(r.RESET, 9), snapshot))  # type: ignore[arg-type]
    assert follower.held[2][2] == 7


def mid_snapshot(wire: Wire) -> Follower:
    """Acked 1..3 in term 7, then a resync's first chunk, then a new leader's first chunk
    over it; the rest of that snapshot still on its way."""
    follower = synced(7)
    follower.receive(wire, batch(7, 1, enq(1), enq(2), enq(3)))  # type: ignore[arg-type]
    assert follower.position == (7, 3)
    follower.receive(wire, batch(7, 0, r.mark(r.RESET, 9), enq(2), r.mark(r.MORE, 9)))  # type: ignore[arg-type]
    assert follower.position == (7, 3)
    follower.receive(wire, batch(9, 0, r.mark(r.RESET, 4), enq(3), r.mark(r.MORE, 4)))  # type: ignore[arg-type]
    return follower


def test_what_it_acked_is_kept_until_a_snapshot_replacing_it_is_durable() -> None:
    """A resync (or a new leader's first batch) must not leave the member holding less
    than it acknowledged while the snapshot streams: the leader counted that copy, and a
    failover meanwhile elects on ``position`` and serves the copy that position names."""
    wire = Wire()
    follower = mid_snapshot(wire)
    assert follower.position == (7, 3)  # still the copy of term 7 up to 3
    promoted = mid_snapshot(Wire())  # elected now: it serves what it acked
    promoted.restore_kept()
    assert sorted(promoted.held) == [1, 2, 3]
    bodies = sorted(promoted.store.read(slot)[5] for slot, _s, _d in promoted.held.values())
    assert bodies == [b"m1", b"m2", b"m3"]
    # the last chunk arrives and is durable: the snapshot's copy replaces the kept one
    follower.receive(wire, batch(9, 0, r.snap(4, 1), enq(4)))  # type: ignore[arg-type]
    assert follower.position == (9, 4)
    assert sorted(follower.held) == [3, 4] and follower.kept is None


def test_a_new_terms_batch_before_its_snapshot_is_refused_and_ranks_nothing() -> None:
    """Term 8's first snapshot was lost with a link; its heartbeat and its next batch
    (index 1, right after that snapshot's index 0) arrive: both refused as a gap. The
    member ranks with term 7's copy, which a promotion serves: applied, the batch ended
    the kept copy and ranked (8, 1), a copy lacking every message, above a member at
    (7, 2) that holds them."""
    wire = Wire()
    follower = synced(7)
    follower.receive(wire, batch(7, 1, enq(1), enq(2), enq(3)))  # type: ignore[arg-type]
    assert follower.position == (7, 3)
    follower.receive(wire, batch(8, 1))  # type: ignore[arg-type]
    follower.receive(wire, batch(8, 1, enq(4)))  # type: ignore[arg-type]
    answers = [(a.term, a.durable_index, a.ok) for a in wire.sent[-2:]]  # type: ignore[attr-defined]
    assert answers == [(8, 0, False), (8, 0, False)]  # the leader resends the snapshot
    assert follower.position == (7, 3)
    promoted = synced(7)
    promoted.receive(Wire(), batch(7, 1, enq(1), enq(2), enq(3)))  # type: ignore[arg-type]
    promoted.receive(Wire(), batch(8, 1, enq(4)))  # type: ignore[arg-type]
    promoted.restore_kept()
    assert sorted(promoted.held) == [1, 2, 3]
    # the snapshot comes again: once durable, the member ranks with term 8
    follower.receive(wire, batch(8, 0, r.mark(r.RESET, 1), enq(2), enq(3), enq(4)))  # type: ignore[arg-type]
    assert follower.position == (8, 1) and sorted(follower.held) == [2, 3, 4]


def test_what_the_leader_said_was_committed_is_known_by_message_number() -> None:
    """A promoted member serves at once only the messages its old leader had said were
    committed (``sure_seq``); within a term a message's number grows with its index."""
    wire = Wire()
    follower = synced(7)
    follower.receive(wire, batch(7, 1, enq(1), enq(2), r.mark(r.DEL, 1), enq(3)))  # type: ignore[arg-type]
    assert follower.sure_seq == 0  # the batch named commit 0
    follower.receive(wire, f.Replicate("/", "q", 7, 5, 3, []))  # type: ignore[arg-type]
    assert follower.sure_seq == 2  # index 3 committed: 1 and 2, not 3 (index 4)
    follower.receive(wire, f.Replicate("/", "q", 7, 5, 4, [enq(4)]))  # type: ignore[arg-type]
    assert follower.sure_seq == 3
    # term 8's snapshot (upto 2) begins: nothing of term 8 is known committed yet
    follower.receive(wire, batch(8, 0, r.mark(r.RESET, 2), enq(3), r.mark(r.MORE, 2)))  # type: ignore[arg-type]
    assert follower.sure_seq == 0
    follower.receive(wire, f.Replicate("/", "q", 8, 0, 2, [r.snap(2, 1), enq(4), enq(9)]))  # type: ignore[arg-type]
    assert follower.sure_seq == 9  # its messages stand at 2, which the leader named
    promoted = synced(7)
    promoted.receive(wire, f.Replicate("/", "q", 7, 1, 1, [enq(1), enq(2)]))  # type: ignore[arg-type]
    promoted.receive(wire, batch(8, 0, r.mark(r.RESET, 2), enq(3), r.mark(r.MORE, 2)))  # type: ignore[arg-type]
    promoted.restore_kept()  # elected mid-snapshot: the kept copy's knowledge serves
    assert promoted.sure_seq == 1 and sorted(promoted.held) == [1, 2]
