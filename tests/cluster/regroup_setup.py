"""The set-up the regroup tests of quorum queues and streams share
(``test_quorum_regroup_safe.py``, ``test_stream_regroup_safe.py``): node n1's leader of
the group {n1, n2, n3} over a real etcd and a real election, holding 3 entries that n1
and n2 hold (committed) and n3 none, its node's group watch running. The node's group
owner (a quorum manager, a stream's groups) is a namespace with what the code reads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from roost.cluster.coordinator import Coordinator
from roost.cluster.election import Election
from roost.cluster.etcd_server import EtcdServer
from roost.cluster.link import frames as f
from roost.cluster.quorum.groupbase import GroupBase
from roost.cluster.quorum.members import MemberControl
from roost.cluster.urls import parse_cluster_url
from roost.core.broker import Broker
from roost.core.message import Message, Properties

TERM_WAIT = 10.0  # seconds any one step may take on a loaded box


class GroupLeader:
    """``rep`` leading its queue's group; ``changes`` (``Regroup``, ``StreamMembers``)
    writes the group record of kind ``record`` under the election of kind ``leaders``."""

    async def lead(
        self, etcd: EtcdServer, prefix: str, broker: Broker, rep: Any,
        changes: Callable[[Any], Any], *, leaders: str, record: str,
        request: dict[str, Any] | None, commit: Callable[[], int],
    ) -> None:  # fmt: skip
        self.key = key = (rep.queue.vhost.name, rep.queue.name)
        self.rep, self.record = rep, record
        self.coordinator = Coordinator(parse_cluster_url(etcd.url())[0], timeout=5.0)
        lease = await self.coordinator.grant_lease(30)
        owner: Any = SimpleNamespace(
            prefix=prefix, name="n1", node=SimpleNamespace(coordinator=self.coordinator,
            membership=None), broker=broker, leading={key: rep}, elections={}, following={},
            groups={}, tasks={}, free=set(),
        )  # fmt: skip
        owner._key = lambda kind, key: GroupBase._key(owner, kind, key)

        def spawn_free(work: Any) -> None:
            owner.free.add(asyncio.get_running_loop().create_task(work))

        # a quorum manager spawns its own work; a stream's groups spawn through it
        owner._spawn_free = spawn_free
        owner.quorum = SimpleNamespace(_spawn_free=spawn_free)
        self.owner = owner
        self.election = Election(self.coordinator, owner._key(leaders, key), "n1", lease)
        await self.election.campaign_once()
        owner.elections[key] = self.election
        self.changes = changes(owner)
        assert await self.changes._write(key, rep, self.election, list(rep.members), 3, request)
        rep.started(self.election.term)
        for n in range(3):
            assert rep.queue.push(Message("", key[1], Properties(), b"m%d" % n))
        await self.until(lambda: rep.own_durable == 3)
        self.ack("n2", 3)
        assert commit() == 3
        self.watch = asyncio.get_running_loop().create_task(self.changes.follow())
        self.control = MemberControl(owner)

    def ack(self, member: str, index: int) -> None:
        """``member`` holds the log up to ``index``, as its follower would say."""
        ack = f.ReplicateAck(self.key[0], self.key[1], self.rep.term, index, True)
        self.rep.acknowledged(member, ack)

    async def until(self, condition: Any) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TERM_WAIT
        while not condition():
            assert loop.time() < deadline
            await asyncio.sleep(0.01)

    async def members(self) -> list[str]:
        """The members the group record in etcd names."""
        kv = await self.coordinator.get(self.owner._key(self.record, self.key))
        assert kv is not None
        return list(json.loads(kv.value)["members"])

    async def stop(self) -> None:
        self.watch.cancel()
        self.rep.close()
        for task in self.owner.free:
            task.cancel()
        await self.coordinator.revoke_lease(self.election.lease_id)
        await self.coordinator.close()
