"""A replicated stream's leader writes a new group only once a majority of it holds the
commit (``cluster/quorum/stream_change.py``, the quorum queues' ``safechange.py``): the
real ``StreamMembers`` and ``MemberControl`` (what ``roost ctl queues delete-member``
calls) over a real etcd, a real election and a real ``StreamReplicator``; the members'
acks are the frames a follower would send.

The loss this guards against: n2 taken out of {n1, n2, n3} while n3 lags records n1 and
n2 committed, a node added at once, n1 killed before n3 caught up: n3 and the empty
newcomer elected n3, which lacked confirmed records. A leader handing over wrote the new
group after 5 s even if the others were behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from roost.cluster.coordinator import Coordinator
from roost.cluster.election import Election
from roost.cluster.etcd_server import EtcdServer
from roost.cluster.link import frames as f
from roost.cluster.quorum import safechange
from roost.cluster.quorum.groupbase import GroupBase
from roost.cluster.quorum.members import MemberControl
from roost.cluster.quorum.stream_leader import StreamReplicator
from roost.cluster.quorum.stream_members import StreamMembers
from roost.cluster.urls import parse_cluster_url
from roost.core.errors import BrokerError
from roost.core.message import Message, Properties
from roost.store.stream_store import StreamFiles
from tests.brokers import memory_broker
from tests.quorum_links import Links

KEY = ("/", "s")
TERM_WAIT = 10.0  # seconds any one step may take on a loaded box


class Leader:
    """n1 leading the stream {n1, n2, n3} with 3 records that n1 and n2 hold
    (committed), n3 none; its node's stream-group watch running."""

    async def start(self, etcd: EtcdServer, prefix: str, data: Path) -> None:
        self.coordinator = Coordinator(parse_cluster_url(etcd.url())[0], timeout=5.0)
        lease = await self.coordinator.grant_lease(30)
        broker = memory_broker(stream_storage=StreamFiles(data))
        vhost = broker.vhosts["/"]
        vhost.declare_queue("s", durable=True, arguments={"x-queue-type": "stream"})
        queue = vhost.queues["s"]
        links: Any = Links(("n2", "n3"))
        self.rep = rep = StreamReplicator(broker, links, queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
        queue.replication = rep
        g: Any = SimpleNamespace(
            prefix=prefix, name="n1", node=SimpleNamespace(coordinator=self.coordinator,
            membership=None), broker=broker, leading={KEY: rep}, elections={}, following={},
            groups={}, tasks={}, free=set(),
        )  # fmt: skip
        g._key = lambda kind, key: GroupBase._key(g, kind, key)
        g.quorum = SimpleNamespace(
            _spawn_free=lambda work: g.free.add(asyncio.get_running_loop().create_task(work))
        )
        self.groups = g
        self.election = Election(self.coordinator, g._key("stream-leaders", KEY), "n1", lease)
        await self.election.campaign_once()
        g.elections[KEY] = self.election
        self.members_here = StreamMembers(g)
        assert await self.members_here._write(KEY, rep, self.election, list(rep.members), 3, {})
        rep.started(self.election.term)
        for n in range(3):
            assert queue.push(Message("", "s", Properties(), b"m%d" % n))
        await self.until(lambda: rep.own_durable == 3)
        self.ack("n2", 3)
        assert rep.commit == 3
        self.watch = asyncio.get_running_loop().create_task(self.members_here.follow())
        self.control = MemberControl(g)

    def ack(self, member: str, end: int) -> None:
        self.rep.acknowledged(member, f.ReplicateAck("/", "s", self.rep.term, end, True))

    async def until(self, condition: Any) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TERM_WAIT
        while not condition():
            assert loop.time() < deadline
            await asyncio.sleep(0.01)

    async def members(self) -> list[str]:
        kv = await self.coordinator.get(self.groups._key("stream-group", KEY))
        assert kv is not None
        return list(json.loads(kv.value)["members"])

    async def stop(self) -> None:
        self.watch.cancel()
        self.rep.close()
        for task in self.groups.free:
            task.cancel()
        await self.coordinator.revoke_lease(self.election.lease_id)
        await self.coordinator.close()


def test_a_stream_member_is_taken_out_only_once_the_rest_hold_the_commit(
    shared_etcd: EtcdServer, etcd_prefix: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def main() -> None:
        leader = Leader()
        await leader.start(shared_etcd, etcd_prefix, tmp_path)
        try:
            # n3 never catches up: the change is refused, the asker gets the reason
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 1.0)
            with pytest.raises(BrokerError, match=r"timeout: members .* did not catch up"):
                await leader.control.delete_member("/", "s", "n2")
            assert await leader.members() == ["n1", "n2", "n3"]
            assert leader.rep.members == ["n1", "n2", "n3"]
            req = leader.groups._key("stream-req", KEY)
            assert await leader.coordinator.get(req) is None  # the asker took the answer
            await leader.until(lambda: KEY not in leader.members_here._busy)
            # asked again, n3 catches up while the change waits: n2 goes then
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 3 * TERM_WAIT)  # never runs out
            asked = asyncio.get_running_loop().create_task(
                leader.control.delete_member("/", "s", "n2")
            )
            await leader.until(lambda: KEY in leader.members_here._busy)
            assert await leader.members() == ["n1", "n2", "n3"]
            leader.ack("n3", 3)
            assert await asyncio.wait_for(asked, TERM_WAIT) == ["n1", "n3"]
            assert leader.rep.members == ["n1", "n3"]
        finally:
            await leader.stop()

    asyncio.run(main())


def test_a_stream_leader_hands_over_only_once_the_rest_hold_its_whole_log(
    shared_etcd: EtcdServer, etcd_prefix: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async def main() -> None:
        leader = Leader()
        await leader.start(shared_etcd, etcd_prefix, tmp_path)
        rep = leader.rep
        try:
            # {n2, n3} needs both: n3 holds nothing, so the leader stays and takes
            # publishes again
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 1.0)
            with pytest.raises(BrokerError, match=r"timeout: members .* did not catch up"):
                await leader.control.delete_member("/", "s", "n1")
            assert await leader.members() == ["n1", "n2", "n3"]
            await leader.until(lambda: KEY not in leader.members_here._busy)
            assert not rep.refusal and not rep.deposed
            assert await leader.election.leader() is not None
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 3 * TERM_WAIT)  # never runs out
            asked = asyncio.get_running_loop().create_task(
                leader.control.delete_member("/", "s", "n1")
            )
            await leader.until(lambda: bool(rep.refusal))
            assert await leader.members() == ["n1", "n2", "n3"]
            leader.ack("n3", 3)
            assert await asyncio.wait_for(asked, TERM_WAIT) == ["n2", "n3"]
            assert rep.deposed and KEY not in leader.groups.leading
            assert await leader.election.leader() is None  # resigned: the others elect
        finally:
            await leader.stop()

    asyncio.run(main())
