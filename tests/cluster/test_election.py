"""Leader election through etcd (the seam replicated queues build on): one winner, its
term is the key's create revision, a successor gets a larger term when the leader's
lease goes, and a deposed leader's fenced writes are refused."""

from __future__ import annotations

import asyncio

from roost.cluster.coordinator import Coordinator, Put
from roost.cluster.election import Election
from roost.cluster.etcd_server import EtcdServer
from roost.cluster.urls import parse_cluster_url


def coordinator(etcd: EtcdServer) -> Coordinator:
    endpoints, _ = parse_cluster_url(etcd.url())
    return Coordinator(endpoints, timeout=2.0)


def test_one_leader_then_a_fenced_successor(shared_etcd: EtcdServer, etcd_prefix: str) -> None:
    key = etcd_prefix + "/leaders/%2F/qq"
    state = etcd_prefix + "/state/qq"

    async def main() -> None:
        ca, cb = coordinator(shared_etcd), coordinator(shared_etcd)
        try:
            la, lb = await ca.grant_lease(2), await cb.grant_lease(2)
            a = Election(ca, key, "a", la)
            b = Election(cb, key, "b", lb)
            first = await asyncio.gather(a.campaign_once(), b.campaign_once())
            assert first[0] == first[1]  # both see the same leader
            winner, loser = (a, b) if a.term else (b, a)
            assert winner.term == first[0].term and loser.term == 0
            assert (await winner.fenced_txn([], [Put(state, b"1")])).succeeded
            assert not (await loser.fenced_txn([], [Put(state, b"x")])).succeeded
            # the winner's lease goes (its node died): the loser takes over, later term
            old_term = winner.term
            successor = asyncio.create_task(loser.campaign())
            await winner.coordinator.revoke_lease(winner.lease_id)
            new_term = await asyncio.wait_for(successor, 10)
            assert new_term > old_term
            # the deposed leader still believes in its term: etcd refuses its writes
            assert winner.term == old_term
            assert not (await winner.fenced_txn([], [Put(state, b"stale")])).succeeded
            assert (await loser.fenced_txn([], [Put(state, b"2")])).succeeded
            got = await ca.get(state)
            assert got is not None and got.value == b"2"
            leader = await a.leader()
            assert leader is not None and leader.term == new_term
            await loser.resign()
            assert await a.leader() is None
        finally:
            await ca.close()
            await cb.close()

    asyncio.run(main())
