"""A quorum member's record of its copy (``store/member_log.py``), sans-IO over a real
disk store: written in the group commit before the member acknowledges, recovered with
the copy after a restart, and a torn, absent or contradicted record is no copy at all
(the member restarts as one that forgot)."""

from __future__ import annotations

from pathlib import Path

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.quorum.candidacy import may_campaign
from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.rejoining import UNBOUNDED
from roost.store.hub import DiskStore
from roost.store.member_log import MEMBER_FILE, read_member
from roost.store.memory import MemoryStore
from roost.store.orphans import quarantine_orphans
from tests.quorum_links import Wire, batch, enq


def member_with_three(data: Path) -> tuple[DiskStore, Follower, Wire]:
    """A member of term 5 holding messages 1, 2 (delivered), 3, with 2 then acked."""
    store = DiskStore(data)
    follower = Follower(store, "/", "q")
    wire = Wire()
    follower.receive(wire, batch(5, 0, r.mark(r.RESET, 0)))  # type: ignore[arg-type]
    store.sync_now()
    follower.receive(wire, batch(5, 1, enq(1), enq(2), enq(3), r.mark(r.DLV, 2)))  # type: ignore[arg-type]
    store.sync_now()
    follower.receive(wire, batch(5, 5, r.mark(r.DEL, 1)))  # type: ignore[arg-type]
    store.sync_now()
    return store, follower, wire


def acks(wire: Wire) -> list[tuple[int, int, bool]]:
    return [(a.term, a.durable_index, a.ok) for a in wire.sent if isinstance(a, f.ReplicateAck)]


def test_the_record_holding_an_index_is_written_before_its_ack(tmp_path: Path) -> None:
    store, follower, wire = member_with_three(tmp_path)
    follower.receive(wire, batch(5, 6, enq(4)))  # type: ignore[arg-type]
    assert acks(wire)[-1] == (5, 5, True)  # index 6 not acknowledged before its commit
    store.sync_now()
    assert acks(wire)[-1] == (5, 6, True)
    state, named = read_member(store.open_queue("/", "q").dir / MEMBER_FILE)
    assert state is not None and (state["marked"], state["durable"]) == (5, 6)
    assert sorted(seq for seq, covered in named.values() if covered) == [2, 3, 4]


def test_a_restarted_member_keeps_its_copy_and_position(tmp_path: Path) -> None:
    _store, before, _wire = member_with_three(tmp_path)
    again = DiskStore(tmp_path)
    assert quarantine_orphans(tmp_path, set()) == []  # claimed by its record, not moved
    assert again.member_copies() == [("/", "q")]
    copy = again.recover_member("/", "q")
    assert copy is not None
    after = Follower(again, "/", "q", copy)
    assert after.position == before.position == (5, 5)
    assert list(after.held) == [2, 3]
    assert after.held[2][2] == 1  # delivered before: redelivered if it leads
    assert after.store.read(after.held[3][0])[5] == b"m3"
    # the leader's next batch is refused as a gap: it sends a whole snapshot
    wire = Wire()
    after.receive(wire, batch(5, 6, enq(4)))  # type: ignore[arg-type]
    assert acks(wire) == [(5, 5, False)] and list(after.held) == [2, 3]


def test_a_record_torn_before_its_first_state_is_no_copy(tmp_path: Path) -> None:
    store, _follower, _wire = member_with_three(tmp_path)
    path = store.open_queue("/", "q").dir / MEMBER_FILE
    data = path.read_bytes()
    first_state = data.index(b'S{"durable"')
    path.write_bytes(data[: first_state + 5])  # torn inside the first state
    again = DiskStore(tmp_path)
    assert again.recover_member("/", "q") is None
    assert not path.parent.exists()  # the copy goes: a snapshot replaces it


def test_an_absent_record_is_no_copy(tmp_path: Path) -> None:
    store, _follower, _wire = member_with_three(tmp_path)
    (store.open_queue("/", "q").dir / MEMBER_FILE).unlink()
    again = DiskStore(tmp_path)
    assert again.member_copies() == []
    assert again.recover_member("/", "q") is None


def test_a_message_the_record_covers_but_the_store_lost_is_no_copy(tmp_path: Path) -> None:
    store, _follower, _wire = member_with_three(tmp_path)
    directory = store.open_queue("/", "q").dir
    for segment in directory.glob("*.seg"):
        segment.unlink()  # the segments lost, the record kept
    assert DiskStore(tmp_path).recover_member("/", "q") is None


def test_an_old_leader_without_its_copy_votes_with_a_bound_until_made_whole() -> None:
    """Succeeded while down (``rejoining.vote_bounded``): its position bounds the log it
    had, so only a member with a newer term may win over it; a snapshot ends the bound."""
    old = Follower(MemoryStore(), "/", "q")
    old.bound = (16, UNBOUNDED)
    members, running = ["n1", "n2", "n3"], ["n1", "n3"]
    assert may_campaign("n3", (17, 5), {"n1": old.position}, members, running)
    assert not may_campaign("n3", (16, 9), {"n1": old.position}, members, running)
    old.receive(Wire(), batch(20, 0, r.mark(r.RESET, 3), enq(1)))  # type: ignore[arg-type]
    assert old.bound is None and old.position == (20, 3)
