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
from pathlib import Path
from typing import Any

import pytest

from roost.cluster.etcd_server import EtcdServer
from roost.cluster.quorum import safechange
from roost.cluster.quorum.stream_leader import StreamReplicator
from roost.cluster.quorum.stream_members import StreamMembers
from roost.core.errors import BrokerError
from roost.store.stream_store import StreamFiles
from tests.brokers import memory_broker
from tests.cluster.regroup_setup import TERM_WAIT, GroupLeader
from tests.quorum_links import Links

KEY = ("/", "s")


class Leader(GroupLeader):
    """n1 leading the stream {n1, n2, n3} with 3 records that n1 and n2 hold
    (committed), n3 none; its node's stream-group watch running."""

    async def start(self, etcd: EtcdServer, prefix: str, data: Path) -> None:
        broker = memory_broker(stream_storage=StreamFiles(data))
        vhost = broker.vhosts["/"]
        vhost.declare_queue("s", durable=True, arguments={"x-queue-type": "stream"})
        queue = vhost.queues["s"]
        links: Any = Links(("n2", "n3"))
        rep = StreamReplicator(broker, links, queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
        queue.replication = rep
        await self.lead(etcd, prefix, broker, rep, StreamMembers, leaders="stream-leaders",
                        record="stream-group", request={}, commit=lambda: rep.commit)  # fmt: skip


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
            req = leader.owner._key("stream-req", KEY)
            assert await leader.coordinator.get(req) is None  # the asker took the answer
            await leader.until(lambda: KEY not in leader.changes._busy)
            # asked again, n3 catches up while the change waits: n2 goes then
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 3 * TERM_WAIT)  # never runs out
            asked = asyncio.get_running_loop().create_task(
                leader.control.delete_member("/", "s", "n2")
            )
            await leader.until(lambda: KEY in leader.changes._busy)
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
            await leader.until(lambda: KEY not in leader.changes._busy)
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
            assert rep.deposed and KEY not in leader.owner.leading
            assert await leader.election.leader() is None  # resigned: the others elect
        finally:
            await leader.stop()

    asyncio.run(main())
