"""A quorum queue's leader writes a new group only once a majority of it holds the
commit index (``cluster/quorum/safechange.py``): the real ``Regroup`` and
``MemberControl`` (what ``roost ctl queues delete-member`` calls) over a real etcd and a
real ``Replicator``; the members' acks are the frames a follower would send.

The loss this guards against: n2 taken out of {n1, n2, n3} while n3 lags records n1 and
n2 committed, a node added at once, n1 killed before n3 caught up: n3 and the empty
newcomer elected n3, which lacked confirmed messages. A leader handing over (taken out
of its own group) wrote the new group after 5 s even if the others were behind."""

from __future__ import annotations

import asyncio

import pytest

from roost.cluster.etcd_server import EtcdServer
from roost.cluster.quorum import safechange
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.regroup import Regroup
from roost.core.errors import BrokerError
from roost.core.queues.quorum import QuorumQueue
from tests.brokers import memory_broker
from tests.cluster.regroup_setup import TERM_WAIT, GroupLeader
from tests.quorum_links import Links

KEY = ("/", "q")


class Leader(GroupLeader):
    """n1 leading {n1, n2, n3} with 3 messages that n1 and n2 hold (committed), n3
    none; its node's group watch running."""

    async def start(self, etcd: EtcdServer, prefix: str) -> None:
        broker = memory_broker()
        vhost = broker.catalog.vhosts["/"]
        queue = QuorumQueue(vhost, "q", durable=True, arguments={"x-queue-type": "quorum"})
        vhost.adopt_queue(queue)
        rep = Replicator(broker, Links(), queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
        queue.replication = rep
        await self.lead(etcd, prefix, broker, rep, Regroup, leaders="leaders", record="quorum",
                        request=None, commit=lambda: rep.commit_index)  # fmt: skip


def test_a_member_is_taken_out_only_once_the_rest_hold_the_commit_index(
    shared_etcd: EtcdServer, etcd_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        leader = Leader()
        await leader.start(shared_etcd, etcd_prefix)
        try:
            # n3 never catches up: the change is refused, the asker gets the reason
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 1.0)
            with pytest.raises(BrokerError, match=r"timeout: members .* did not catch up"):
                await leader.control.delete_member("/", "q", "n2")
            assert await leader.members() == ["n1", "n2", "n3"]
            assert leader.rep.members == ["n1", "n2", "n3"]
            req = leader.owner._key("quorum-req", KEY)
            assert await leader.coordinator.get(req) is None  # the asker took the answer
            await leader.until(lambda: KEY not in leader.changes._busy)  # the leader is done
            # asked again, n3 catches up while the change waits: n2 goes then
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 3 * TERM_WAIT)  # never runs out
            asked = asyncio.get_running_loop().create_task(
                leader.control.delete_member("/", "q", "n2")
            )
            await leader.until(lambda: KEY in leader.changes._busy)
            assert await leader.members() == ["n1", "n2", "n3"]
            leader.ack("n3", 3)
            assert await asyncio.wait_for(asked, TERM_WAIT) == ["n1", "n3"]
            assert leader.rep.members == ["n1", "n3"]
        finally:
            await leader.stop()

    asyncio.run(main())


def test_a_leader_hands_over_only_once_the_rest_hold_its_whole_log(
    shared_etcd: EtcdServer, etcd_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        leader = Leader()
        await leader.start(shared_etcd, etcd_prefix)
        rep = leader.rep
        try:
            # {n2, n3} needs both: n3 holds nothing, so the leader stays and takes
            # publishes again
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 1.0)
            with pytest.raises(BrokerError, match=r"timeout: members .* did not catch up"):
                await leader.control.delete_member("/", "q", "n1")
            assert await leader.members() == ["n1", "n2", "n3"]
            await leader.until(lambda: KEY not in leader.changes._busy)  # the leader is done
            assert not rep.refusing and not rep.deposed
            assert await leader.election.leader() is not None
            monkeypatch.setattr(safechange, "CHANGE_WAIT", 3 * TERM_WAIT)  # never runs out
            asked = asyncio.get_running_loop().create_task(
                leader.control.delete_member("/", "q", "n1")
            )
            await leader.until(lambda: rep.refusing)
            assert await leader.members() == ["n1", "n2", "n3"]
            leader.ack("n3", 3)
            assert await asyncio.wait_for(asked, TERM_WAIT) == ["n2", "n3"]
            assert rep.deposed and KEY not in leader.owner.leading
            assert await leader.election.leader() is None  # resigned: the others elect
        finally:
            await leader.stop()

    asyncio.run(main())
