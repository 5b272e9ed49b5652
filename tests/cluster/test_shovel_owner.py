"""A dynamic shovel runs on exactly one node, the holder of its etcd election key
(``owners/shovel…``): a node joining does not start a second copy (it used to, when the
runner was picked by hashing over the running nodes and the newcomer hashed highest),
and when the holder is killed (-9) another node takes it over once the holder's lease
ends, moving each message once."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path

from roost.cluster.coordinator import Coordinator
from roost.cluster.etcd_server import EtcdServer
from roost.cluster.urls import parse_cluster_url
from tests.cluster.conftest import node
from tests.cluster.management_api import put, shovel_rows, status
from tests.cluster.nodes import channel
from tests.support import RoostProcess, eventually

KEY = "shovel///fan"  # the election's key for shovel 'fan' in vhost '/'


def owners(etcd: EtcdServer, prefix: str) -> list[str]:
    """The nodes holding a shovel's election key (at most one, by etcd's compare)."""

    async def read() -> list[str]:
        endpoints, _ = parse_cluster_url(etcd.url())
        c = Coordinator(endpoints, timeout=3.0)
        try:
            kvs, _ = await c.get_prefix(f"{prefix}/owners/")
            return [json.loads(kv.value)["node"] for kv in kvs]
        finally:
            await c.close()

    return asyncio.run(read())


def preferred(names: list[str]) -> str:
    """The node rendezvous hashing picks for KEY (ClusterNode.runs_here)."""
    return max(names, key=lambda n: hashlib.sha1(f"{KEY}\0{n}".encode()).digest())


def running(nodes: list[RoostProcess]) -> list[list[str]]:
    return [shovel_rows(n) for n in nodes]


def running_anywhere(nodes: list[RoostProcess]) -> list[str]:
    return [name for rows in running(nodes) for name in rows]


def test_one_node_runs_a_shovel_through_joins_and_a_kill(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    ttl = ("--cluster-lease-ttl", "2")
    n1 = node(shared_etcd, tmp_path / "n1", "n1", *ttl, prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", *ttl, prefix=etcd_prefix).start()
    nodes = [n1, n2]
    try:
        c1, ch1 = channel(n1)
        ch1.queue_declare("landed")
        value = {"src-uri": "amqp://", "src-exchange": "amq.fanout",
                 "dest-uri": "amqp://", "dest-queue": "landed"}  # fmt: skip
        put(n1, "/api/parameters/shovel/%2F/fan", {"value": value})
        eventually(lambda: running_anywhere(nodes) == ["fan"], what=lambda: running(nodes))
        runner = nodes[0] if shovel_rows(nodes[0]) else nodes[1]
        runner_name = "n1" if runner is n1 else "n2"
        assert owners(shared_etcd, etcd_prefix) == [runner_name]
        c1.close()

        # a third node that hashing prefers joins: the runner keeps the shovel
        names = ["n1", "n2"]
        third = next(f"n3-{i}" for i in range(1000) if preferred([*names, f"n3-{i}"]) == f"n3-{i}")
        n3 = node(shared_etcd, tmp_path / third, third, *ttl, prefix=etcd_prefix).start()
        nodes.append(n3)

        def sees_three() -> bool:
            code, rows = status(runner, "/api/nodes")
            return code == 200 and sum(r["running"] for r in rows) == 3

        eventually(sees_three)
        until = time.monotonic() + 3  # longer than any node takes to act on a join
        while time.monotonic() < until:
            assert running_anywhere(nodes) == ["fan"], running(nodes)
            assert shovel_rows(runner) == ["fan"]
            time.sleep(0.2)
        assert owners(shared_etcd, etcd_prefix) == [runner_name]

        # the runner is killed: one other node takes over once its lease is gone
        runner.kill()
        survivors = [n for n in nodes if n is not runner]
        eventually(lambda: running_anywhere(survivors) == ["fan"], timeout=30,
                   what=lambda: running(survivors))  # fmt: skip
        now = survivors[0] if shovel_rows(survivors[0]) else survivors[1]
        assert owners(shared_etcd, etcd_prefix) == [{n1: "n1", n2: "n2", n3: third}[now]]
        conn, ch = channel(survivors[0])

        def bound() -> bool:
            _code, rows = status(now, "/api/exchanges/%2F/amq.fanout/bindings/source")
            return bool(rows)

        eventually(bound)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("amq.fanout", "", b"m%d" % i)
        ch.basic_publish("", "landed", b"marker")  # behind any second copy

        def landed() -> int:
            return int(ch.queue_declare("landed", passive=True).method.message_count)

        eventually(lambda: landed() >= 4, what=landed)
        time.sleep(0.5)  # a second copy, if any, would land right behind
        bodies = []
        while (got := ch.basic_get("landed", auto_ack=True))[0] is not None:
            bodies.append(got[2])
        assert sorted(bodies) == [b"m0", b"m1", b"m2", b"marker"]
        conn.close()
    finally:
        for n in nodes:
            n.kill()
