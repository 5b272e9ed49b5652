"""A node whose etcd lease is lost while it starts takes a new lease and registers again,
instead of exiting with "requested lease not found" (as nodes did on a box at load 13
with 2 s leases). The name never has a second live registration: the live key is the
node's one, under its current lease, never a key without a lease."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pika

from roost.cluster.coordinator import Coordinator
from roost.cluster.etcd_server import EtcdServer
from roost.cluster.membership import LEASE_FILE, Membership, NodeRecord
from roost.cluster.urls import parse_cluster_url
from tests.cluster.conftest import node
from tests.support import until


def coordinator(etcd: EtcdServer) -> Coordinator:
    endpoints, _ = parse_cluster_url(etcd.url())
    return Coordinator(endpoints, timeout=3.0)


def test_a_lease_lost_during_start_up_is_replaced(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    """The node's event loop is blocked for 6 s just before it publishes its client ports
    (ROOST_TEST_START_STALL; a 2 s lease cannot survive that): it registers again under a
    new lease and serves."""
    n1 = node(shared_etcd, tmp_path / "n1", "n1", "--cluster-lease-ttl", "2", prefix=etcd_prefix)
    n1.env["ROOST_TEST_START_STALL"] = "6"
    n1.start(timeout=60)
    try:
        assert n1.proc is not None and n1.proc.poll() is None
        assert "registered again as 'n1' with a new lease" in n1.log

        async def registration() -> tuple[list[tuple[str, int, bytes]], int]:
            c = coordinator(shared_etcd)
            try:
                kvs, _ = await c.get_prefix(f"{etcd_prefix}/nodes/live/")
                lease = int((tmp_path / "n1" / LEASE_FILE).read_text(), 16)
                left = await c.refresh_lease(lease)
                return [(kv.key, kv.lease, kv.value) for kv in kvs], (lease if left > 0 else 0)
            finally:
                await c.close()

        live, lease = asyncio.run(registration())
        assert lease, "the node's current lease is not alive in etcd"
        assert [(key, held) for key, held, _ in live] == [(f"{etcd_prefix}/nodes/live/n1", lease)]
        record = NodeRecord.decode(live[0][2])
        assert record.amqp_port == n1.amqp_port  # the record published after the stall

        conn = pika.BlockingConnection(pika.URLParameters(n1.url))
        ch = conn.channel()
        ch.queue_declare("after-the-stall")
        ch.basic_publish("", "after-the-stall", b"served")
        deadline = time.monotonic() + 10
        got = None
        while got is None and time.monotonic() < deadline:
            _method, _props, got = ch.basic_get("after-the-stall", auto_ack=True)
        assert got == b"served"
        conn.close()
    finally:
        n1.stop()


def test_a_lease_expired_before_the_join_is_replaced(
    shared_etcd: EtcdServer, etcd_prefix: str
) -> None:
    """The lease granted for the join is gone before the join's transaction (a starved
    node): the join takes another and registers once, under it."""

    async def main() -> None:
        endpoints, _ = parse_cluster_url(shared_etcd.url())
        c = Coordinator(endpoints, timeout=3.0)
        granted: list[int] = []
        grant = c.grant_lease

        async def grant_then_lose(ttl: int) -> int:
            lease = await grant(ttl)
            granted.append(lease)
            if len(granted) == 1:
                await c.revoke_lease(lease)  # expired before the node could use it
            return lease

        c.grant_lease = grant_then_lose  # type: ignore[method-assign]
        m = Membership(c, etcd_prefix, NodeRecord("n1", "127.0.0.1", 25001, pid=1), ttl=2)
        await m.join()
        assert len(granted) == 2 and m.lease_id == granted[1]
        kvs, _ = await c.get_prefix(f"{etcd_prefix}/nodes/live/")
        assert [(kv.key, kv.lease) for kv in kvs] == [(f"{etcd_prefix}/nodes/live/n1", granted[1])]
        await m.leave()
        await c.close()

    asyncio.run(main())


def test_a_record_published_after_the_lease_is_gone_registers_again(
    shared_etcd: EtcdServer, etcd_prefix: str
) -> None:
    """A record update under a lease etcd no longer has (revoked behind the node's back)
    re-registers under a new lease carrying the new record, and leaves no live key
    without a lease behind."""

    async def main() -> None:
        c, outside = coordinator(shared_etcd), coordinator(shared_etcd)
        m = Membership(c, etcd_prefix, NodeRecord("n1", "127.0.0.1", 25001, pid=1), ttl=2)
        await m.join()
        first = m.lease_id
        await outside.revoke_lease(first)
        await m.update_record(NodeRecord("n1", "127.0.0.1", 25001, amqp_port=5999, pid=1))
        assert m.lease_id not in (0, first)
        kvs, _ = await outside.get_prefix(f"{etcd_prefix}/nodes/live/")
        assert [(kv.key, kv.lease) for kv in kvs] == [(f"{etcd_prefix}/nodes/live/n1", m.lease_id)]
        assert NodeRecord.decode(kvs[0].value).amqp_port == 5999
        await until(lambda: "n1" in m.live)  # its own watch sees it back
        await m.leave()
        await c.close()
        await outside.close()

    asyncio.run(main())
