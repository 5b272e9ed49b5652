"""A quorum member's record of its copy (``store/member_log.py``), sans-IO over a real
disk store: written in the group commit before the member acknowledges, recovered with
the copy after a restart, and a torn, absent or contradicted record is no copy at all
(the member restarts as one that forgot)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.quorum.candidacy import may_campaign
from roost.cluster.quorum.deposed import name_successor, release, replaced_by_stand_in, stand_down
from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.rejoining import UNBOUNDED
from roost.cluster.quorum.standin import QuorumStandIn
from roost.core.events import Event, QueueDeleted
from roost.core.message import Message, Properties
from roost.core.persistence import Persistence
from roost.core.queues.quorum import QuorumQueue
from roost.store.hub import DiskStore
from roost.store.member_copies import GuestStore
from roost.store.member_log import MEMBER_FILE, read_member
from roost.store.memory import MemoryDefinitions, MemoryStore
from roost.store.orphans import quarantine_orphans
from tests.brokers import memory_broker
from tests.quorum_links import Wire, batch, enq
from tests.unit.test_quorum_handover import Changes, Plane


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


QUORUM_ITEM = {"name": "q", "vhost": "/", "durable": True, "arguments": {"x-queue-type": "quorum"}}


def deposed_member(
    tmp_path: Path, definitions: MemoryDefinitions
) -> tuple[DiskStore, Any, QuorumQueue, Follower, Wire]:
    """n1 led ``q`` (its messages in the queue's directory) and hears term 7's first
    batch: deposed, it follows at once (``manager.frame``), its member copy in that
    directory, and acknowledges records (1 to 3) the new leader may commit with its ack
    alone; its definitions still hold the queue it led. (store, broker, the queue it
    led, the member, its wire.)"""
    store = DiskStore(tmp_path)
    broker = memory_broker(store=store)
    Persistence(broker, store, definitions).install()
    vhost = broker.catalog.vhosts["/"]
    queue = vhost.declare_queue("q", durable=True, arguments={"x-queue-type": "quorum"})
    assert isinstance(queue, QuorumQueue) and queue.store is not None
    for n in range(3):
        vhost.publish("", Message("", "q", Properties(delivery_mode=2), b"old%d" % n))
    store.sync_now()
    rep = queue.replication = Replicator(broker, None, queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
    stand_down(rep)
    release(vhost, "q")  # manager.follow: the queue's store goes, then the member's opens
    follower = Follower(store, "/", "q")
    wire = Wire()
    follower.receive(wire, batch(7, 0, r.mark(r.RESET, 0)))  # type: ignore[arg-type]
    store.sync_now()
    follower.receive(wire, batch(7, 1, enq(1), enq(2), enq(3)))  # type: ignore[arg-type]
    store.sync_now()
    assert acks(wire)[-1] == (7, 3, True)
    return store, broker, queue, follower, wire


def stand_in_factory(vhost: Any, item: Any, home: str) -> QuorumStandIn:
    stand_in = QuorumStandIn(Plane(), vhost, item, home)  # type: ignore[arg-type]
    name_successor(vhost.queues.get(item["name"]), stand_in)  # as manager.make_queue
    return stand_in


def test_a_deposed_leaders_copy_survives_its_queue_turning_into_a_stand_in(
    tmp_path: Path,
) -> None:
    """The definitions' watch replaces the queue n1 led with a stand-in for the new
    leader, which deletes the queue here (its store is destroyed): the copy and its
    record stay, and come back after a restart."""
    store, broker, queue, follower, wire = deposed_member(tmp_path, MemoryDefinitions())
    vhost = broker.catalog.vhosts["/"]
    replaced: list[bool] = []

    def deleted(event: Event) -> None:
        if isinstance(event, QueueDeleted):  # the manager keeps its follower on this
            replaced.append(replaced_by_stand_in(event.queue))

    vhost.on_change.append(deleted)
    Changes(broker, stand_in_factory)._put_remote_queue(QUORUM_ITEM, "n2")
    assert isinstance(vhost.queues["q"], QuorumStandIn) and queue.deleted
    assert replaced == [True]
    store.sync_now()
    state, named = read_member(follower.store.dir / MEMBER_FILE)
    assert state is not None and (state["marked"], state["durable"]) == (7, 3)
    assert sorted(seq for seq, covered in named.values() if covered) == [1, 2, 3]
    follower.receive(wire, batch(7, 4, enq(4)))  # type: ignore[arg-type]
    store.sync_now()
    assert acks(wire)[-1] == (7, 4, True)
    again = DiskStore(tmp_path)
    copy = again.recover_member("/", "q")
    assert copy is not None, "the member copy went with the queue n1 led"
    after = Follower(again, "/", "q", copy)
    assert after.position == (7, 4) and list(after.held) == [1, 2, 3, 4]
    assert after.store.read(after.held[4][0])[5] == b"m4"


def test_a_deposed_leader_restarted_before_its_stand_in_keeps_its_copy(tmp_path: Path) -> None:
    """n1 is killed before the definitions' watch replaced the queue it led: restarted,
    its definitions recreate that queue over the member copy's directory. The queue's
    store there is a guest (``store/member_copies.py``): it takes none of the copy's
    records for the queue's, and the swap to the stand-in deletes nothing of them (it
    deleted the directory before: n1 back as one that forgot). The copy is then
    recovered as the member's (``rejoining.adopt_copies``)."""
    definitions = MemoryDefinitions()
    deposed_member(tmp_path, definitions)  # then killed: nothing more runs
    again = DiskStore(tmp_path)
    broker = memory_broker(store=again)
    persistence = Persistence(broker, again, definitions)
    persistence.install()
    assert persistence.recover()
    vhost = broker.catalog.vhosts["/"]
    led = vhost.queues["q"]
    assert isinstance(led, QuorumQueue) and not led.remote  # as its definitions say
    taken = led.message_count
    Changes(broker, stand_in_factory)._put_remote_queue(QUORUM_ITEM, "n2")
    assert isinstance(vhost.queues["q"], QuorumStandIn) and led.deleted
    assert again.member_copies() == [("/", "q")]
    copy = again.recover_member("/", "q")
    assert copy is not None, "the member copy went with the queue n1 led, at its restart"
    after = Follower(again, "/", "q", copy)
    assert after.position == (7, 3) and list(after.held) == [1, 2, 3]
    assert after.store.read(after.held[3][0])[5] == b"m3"
    assert taken == 0  # the copy's records were never the queue's
    assert persistence.recovered_messages == 0


def test_a_member_copy_whose_queue_went_is_dropped_through_the_member_store(
    tmp_path: Path,
) -> None:
    """``drop_member`` (``adopt_copies``: deleted while this node was down) deletes the
    copy; a guest store opened on it for the queue deletes nothing."""
    member_with_three(tmp_path)
    again = DiskStore(tmp_path)
    guest = again.open_queue("/", "q")
    assert isinstance(guest, GuestStore)
    assert guest.recover(lambda *_: None) == 0
    guest.destroy()
    assert again.member_copies() == [("/", "q")]
    again.drop_member("/", "q")
    assert again.member_copies() == [] and not guest.dir.exists()
