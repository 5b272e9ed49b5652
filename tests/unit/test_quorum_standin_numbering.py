"""A node's stand-in for a replicated queue remembers its clients' acks by message
number, and acks a redelivery of such a number to the new leader unseen. That is sound
only while the numbers name the same messages: a leader recovered from its own disk
numbers its messages afresh from 1 (``QueueBase.restore``). Each run of numbers has a
name (``QuorumQueue.numbering``) that the leader sends with a subscription's
``ConsumeOk`` and in a member's snapshot (``RESET``); the memory holds one run.

Sans-IO: a real ``QuorumStandIn`` whose data plane records what it would send, and a
real ``Follower`` fed the records a leader sends."""

from __future__ import annotations

import asyncio
from typing import Any

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.standin import QuorumStandIn
from roost.cluster.stand_in import RemoteEntry
from roost.core.queues.entry import Entry
from roost.core.queues.quorum import QuorumQueue
from roost.store.memory import MemoryStore
from tests.brokers import memory_broker
from tests.quorum_links import Links, Wire
from tests.unit.quorum_messages import message


class Plane:
    """What the stand-in sends its home node: the settles only."""

    def __init__(self) -> None:
        self.settled: list[tuple[int, f.SettleOp]] = []

    def settle(self, queue: Any, entry: RemoteEntry, op: f.SettleOp, *, requeue: bool) -> None:
        if entry.delivery_id:  # the real plane sends nothing for a void delivery id
            self.settled.append((entry.home_seq, op))


def _stand_in() -> tuple[QuorumStandIn, Plane]:
    plane = Plane()
    vhost = memory_broker().catalog.vhosts["/"]
    item = {"name": "work", "durable": True, "arguments": {"x-queue-type": "quorum"}}
    return QuorumStandIn(plane, vhost, item, "n1"), plane  # type: ignore[arg-type]


def _acked_under(stand_in: QuorumStandIn, numbering: int, *seqs: int) -> None:
    stand_in.subscribed(numbering)
    for seq in seqs:  # a client acked these; the leader went before it replicated that
        stand_in.settle(RemoteEntry(seq, message(b"m%d" % seq), 0, seq))


def test_a_redelivery_in_the_same_run_is_acked_unseen() -> None:
    stand_in, plane = _stand_in()
    _acked_under(stand_in, 11, 1, 2, 3)
    stand_in.subscribed(11)  # a member promoted with its leader's numbers
    stand_in.arrived(5, True, message(b"m2"), 2)
    assert plane.settled == [(2, f.SettleOp.ACK)]
    assert not stand_in.ready


def test_a_renumbered_leader_s_redelivery_reaches_the_client() -> None:
    stand_in, plane = _stand_in()
    _acked_under(stand_in, 11, 1, 2, 3)
    stand_in.subscribed(12)  # the old leader restarted and numbered its disk from 1
    stand_in.arrived(5, True, message(b"m5"), 2)  # another message under number 2
    assert plane.settled == []
    assert [e.message.body for e in stand_in.ready] == [b"m5"]


def test_a_run_not_named_voids_the_memory() -> None:
    stand_in, plane = _stand_in()
    _acked_under(stand_in, 11, 2)
    stand_in.subscribed(0)
    stand_in.arrived(5, True, message(b"m5"), 2)
    assert plane.settled == [] and len(stand_in.ready) == 1


def test_an_ack_remembered_from_another_run_replaces_the_memory() -> None:
    stand_in, _plane = _stand_in()
    _acked_under(stand_in, 11, 1, 2)
    stand_in.remember(7, 12)  # a deposed leader here hands over its own run's number
    assert stand_in.acked == {7} and stand_in.numbering == 12


async def snapshot_names_the_run() -> None:
    broker = memory_broker()
    queue = QuorumQueue(broker.catalog.vhosts["/"], "work", durable=True)
    links = Links(("n2",))
    rep = Replicator(broker, links, queue, "n1", ["n1", "n2"])  # type: ignore[arg-type]
    queue.replication = rep
    queue._seq = 3
    rep.live[3] = Entry(3, message(b"m3"))
    rep.started(9)
    for _ in range(5):  # the snapshot stream goes out
        await asyncio.sleep(0)
    (snapshot,) = links.wires["n2"].sent
    assert r.numbering_of(snapshot.entries[0]) == queue.numbering != 0
    member = Follower(MemoryStore(), "/", "work")
    member.numbering = 5  # a copy of an earlier leader's run
    member.receive(Wire(), snapshot)  # type: ignore[arg-type]
    assert member.numbering == queue.numbering
    rep.close()


def test_a_member_takes_its_leader_s_run_from_the_snapshot() -> None:
    asyncio.run(snapshot_names_the_run())


def test_two_queues_recovered_apart_have_different_runs() -> None:
    vhost = memory_broker().catalog.vhosts["/"]
    first = QuorumQueue(vhost, "work", durable=True)
    again = QuorumQueue(vhost, "work", durable=True)
    assert first.numbering and again.numbering and first.numbering != again.numbering
