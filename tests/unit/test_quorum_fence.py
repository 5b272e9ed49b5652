"""A quorum queue's leader on a node whose etcd lease may have run out (the fence of
cluster/lease.py) hands out nothing and confirms nothing, even what a majority holds;
once the lease is renewed in time what waited goes; once it is known lost, the leader
steps down (its uncommitted publishes nacked). Sans-IO: the real ``Replicator`` and
``LeaderFence`` over the memory broker, links that record the frames sent.
The real-node test is tests/cluster/test_quorum_fence.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from roost.cluster.link import frames as f
from roost.cluster.quorum.fence import LeaderFence
from roost.cluster.quorum.leader import Replicator
from roost.core.errors import BrokerError
from roost.core.queues.quorum import QuorumQueue
from tests.quorum_links import Links
from tests.unit.quorum_messages import message


async def leading() -> tuple[Any, QuorumQueue, Replicator, list[BrokerError | None]]:
    from tests.brokers import memory_broker

    broker = memory_broker()
    queue = QuorumQueue(broker.catalog.vhosts["/"], "work", durable=True)
    rep = Replicator(broker, Links(("n2", "n3")), queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
    queue.replication = rep
    rep.started(9)
    for _ in range(5):  # the (empty) snapshots go out
        await asyncio.sleep(0)
    confirms: list[BrokerError | None] = []
    completion = broker.durable_from_here()
    assert queue.push(message(b"m1"))  # log index 1
    assert completion.then(confirms.append)
    for _ in range(5):  # this node's own write is durable
        await asyncio.sleep(0)
    return broker, queue, rep, confirms


async def renewed_in_time() -> None:
    _broker, queue, rep, confirms = await leading()
    lease = [False]  # the clock says the lease may have run out: fenced before the timer
    rep.in_lease = lambda: lease[0]
    rep.acknowledged("n2", f.ReplicateAck("/", "work", 9, 1, True))  # a majority holds it
    assert confirms == [] and queue.message_count == 0  # neither confirmed nor ready
    lease[0] = True
    rep.fence(True)  # the fence's timer
    rep.acknowledged("n3", f.ReplicateAck("/", "work", 9, 1, True))
    assert confirms == [] and queue.take() is None
    rep.fence(False)  # renewed in time: no one else can lead
    assert confirms == [None] and queue.message_count == 1
    got = queue.take()
    assert got is not None and got.message is not None and got.message.body == b"m1"
    rep.close()


def fence_of(rep: Replicator, lease: int) -> tuple[LeaderFence, Any]:
    """A ``LeaderFence`` over a stand-in node and manager leading ``rep`` (won under
    lease 7); the node's links are the test's recording ones."""
    rep.links.links = rep.links.wires  # type: ignore[attr-defined]  # the peers linked
    node = SimpleNamespace(
        membership=SimpleNamespace(lease_id=lease, fence_listeners=[]),
        frame_handlers=[], link_up=[], link_down=[], links=rep.links,
    )  # fmt: skip
    key = ("/", "work")
    elections = {key: SimpleNamespace(lease_id=7)}
    manager = SimpleNamespace(node=node, leading={key: rep}, elections=elections)
    return LeaderFence(node, manager), node  # type: ignore[arg-type]


async def lease_lost() -> None:
    _broker, queue, rep, confirms = await leading()
    resigned: list[bool] = []
    rep.on_lost_majority = lambda: resigned.append(True)
    fence, node = fence_of(rep, 7)
    fence.changed(True)
    assert rep.fenced and not rep.serving()
    assert all(w.sent[-1] == f.Fenced(True) for w in rep.links.wires.values())  # type: ignore[attr-defined]
    rep.acknowledged("n2", f.ReplicateAck("/", "work", 9, 1, True))
    assert confirms == [] and queue.message_count == 0
    node.membership.lease_id = 8  # registered again under a new lease: the election went
    fence.changed(False)
    assert rep.deposed and resigned == [True]  # stepped down, its election resigned
    assert len(confirms) == 1 and isinstance(confirms[0], BrokerError)  # nacked
    assert queue.take() is None


async def etcd_out_for_all() -> None:
    """etcd out of reach for a majority: no member can campaign, the leader serves."""
    _broker, queue, rep, confirms = await leading()
    fence, _node = fence_of(rep, 7)
    rep.in_lease = lambda: False
    fence.changed(True)
    rep.acknowledged("n2", f.ReplicateAck("/", "work", 9, 1, True))
    assert confirms == [] and queue.message_count == 0
    n2 = rep.links.wires["n2"]  # type: ignore[attr-defined]
    fence.frame(n2, f.Fenced(True))  # n2 is cut off from etcd too
    assert confirms == [None] and queue.message_count == 1
    fence.frame(n2, f.Fenced(False))  # n2 reaches etcd again: it may campaign
    assert not rep.serving() and queue.take() is None
    fence.frame(n2, f.Fenced(True))
    assert rep.serving()
    del rep.links.wires["n2"]  # type: ignore[attr-defined]
    assert not rep.serving()  # a member out of reach: it may reach etcd
    rep.close()


def test_a_fenced_leader_confirms_and_hands_out_only_once_its_lease_is_renewed() -> None:
    asyncio.run(renewed_in_time())


def test_a_leader_whose_lease_ran_out_while_fenced_steps_down() -> None:
    asyncio.run(lease_lost())


def test_a_fenced_leader_serves_while_a_majority_of_its_members_are_fenced_too() -> None:
    asyncio.run(etcd_out_for_all())
