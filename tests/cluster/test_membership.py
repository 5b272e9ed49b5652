"""Membership against a real etcd: nodes register under leases, every node sees the
others, a stopped node stays listed as not running, a name in use is refused, and a node
restarted after a crash frees its name at once by revoking its previous lease."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from roost.cluster.coordinator import Coordinator
from roost.cluster.errors import ClusterError
from roost.cluster.etcd_server import EtcdServer
from roost.cluster.membership import Membership, NodeRecord
from roost.cluster.urls import parse_cluster_url
from tests.support import until


def member(etcd: EtcdServer, prefix: str, name: str, data: Path | None = None) -> Membership:
    endpoints, _ = parse_cluster_url(etcd.url())
    record = NodeRecord(name, "127.0.0.1", 25000 + ord(name[-1]), pid=1)
    return Membership(Coordinator(endpoints, timeout=2.0), prefix, record, ttl=2, data_dir=data)


def test_nodes_see_each_other_and_down_nodes_stay_listed(
    shared_etcd: EtcdServer, etcd_prefix: str
) -> None:
    async def main() -> None:
        a, b, c = (member(shared_etcd, etcd_prefix, n) for n in ("n1", "n2", "n3"))
        seen: list[tuple[str, bool]] = []
        await a.join()
        a.listeners.append(lambda rec, running: seen.append((rec.name, running)))
        await b.join()
        await c.join()
        for m in (a, b, c):
            await until(lambda m=m: [n.name for n in m.running()] == ["n1", "n2", "n3"])
        assert a.live["n2"].cluster_port == 25000 + ord("2")
        await b.leave()
        await until(lambda: ("n2", False) in seen)
        assert [(n.name, n.running) for n in a.nodes()] == [
            ("n1", True),
            ("n2", False),
            ("n3", True),
        ]
        assert seen == [("n2", True), ("n3", True), ("n2", False)]
        for m in (a, c):
            await m.leave()
            await m.coordinator.close()
        await b.coordinator.close()

    asyncio.run(main())


def test_a_name_in_use_is_refused(shared_etcd: EtcdServer, etcd_prefix: str) -> None:
    async def main() -> None:
        a, twin = member(shared_etcd, etcd_prefix, "n1"), member(shared_etcd, etcd_prefix, "n1")
        await a.join()
        with pytest.raises(ClusterError, match="node name 'n1' is in use by a running node"):
            await twin.join(wait_for_name=0.5)
        await a.leave()
        await a.coordinator.close()
        await twin.coordinator.close()

    asyncio.run(main())


def test_killed_node_expires_and_a_restart_frees_its_name_at_once(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    async def main() -> None:
        watcher = member(shared_etcd, etcd_prefix, "n0")
        await watcher.join()
        crashed = member(shared_etcd, etcd_prefix, "n1", tmp_path)
        await crashed.join()
        await until(lambda: "n1" in watcher.live)
        assert crashed.keeper is not None
        await crashed.keeper.stop(revoke=False)  # the process died: no more keepalives
        # a restart from the same data dir does not wait for the TTL
        started = time.monotonic()
        again = member(shared_etcd, etcd_prefix, "n1", tmp_path)
        await again.join(wait_for_name=0)
        assert time.monotonic() - started < 1.5
        await until(lambda: "n1" in watcher.live)
        # and a node that never comes back is down within its TTL
        assert again.keeper is not None
        await again.keeper.stop(revoke=False)
        gone = time.monotonic()
        await until(lambda: "n1" not in watcher.live, timeout=6)
        assert time.monotonic() - gone < 2 + 1.5
        await watcher.leave()
        for m in (watcher, crashed, again):
            await m.coordinator.close()

    asyncio.run(main())
