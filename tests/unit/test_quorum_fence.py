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
from tests.unit.test_quorum_inherit import Links, message


async def leading() -> tuple[Any, QuorumQueue, Replicator, list[BrokerError | None]]:
    from tests.brokers import memory_broker

    broker = memory_broker()
    queue = QuorumQueue(broker.catalog.vhosts["/"], "work", durable=True)
    rep = Replicator(broker, Links(), queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
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


async def lease_lost() -> None:
    _broker, queue, rep, confirms = await leading()
    resigned: list[bool] = []
    rep.on_lost_majority = lambda: resigned.append(True)
    node = SimpleNamespace(membership=SimpleNamespace(lease_id=7))
    key = ("/", "work")
    elections = {key: SimpleNamespace(lease_id=7)}  # won under lease 7
    manager = SimpleNamespace(node=node, leading={key: rep}, elections=elections)
    fence = LeaderFence(manager)  # type: ignore[arg-type]
    fence.changed(True)
    assert rep.fenced and not rep.serving()
    rep.acknowledged("n2", f.ReplicateAck("/", "work", 9, 1, True))
    assert confirms == [] and queue.message_count == 0
    node.membership.lease_id = 8  # registered again under a new lease: the election went
    fence.changed(False)
    assert rep.deposed and resigned == [True]  # stepped down, its election resigned
    assert len(confirms) == 1 and isinstance(confirms[0], BrokerError)  # nacked
    assert queue.take() is None


def test_a_fenced_leader_confirms_and_hands_out_only_once_its_lease_is_renewed() -> None:
    asyncio.run(renewed_in_time())


def test_a_leader_whose_lease_ran_out_while_fenced_steps_down() -> None:
    asyncio.run(lease_lost())
