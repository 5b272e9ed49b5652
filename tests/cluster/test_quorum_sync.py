"""What a replicated quorum queue keeps across a failover and shows on every node, on 3
real nodes and a real etcd: a message's delivery count (``x-delivery-count`` and
``redelivered`` after the leader's kill -9), and ``online`` = the members in sync, not
merely running (a follower stopped with SIGSTOP keeps its lease but drops out)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import pika

from roost.cluster.coordinator import Coordinator
from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.test_quorum import QUORUM, TTL, three_nodes
from tests.cluster.test_quorum_members import publish
from tests.support import RoostProcess, eventually

LOCAL = {"X-Roost-Node-Local": "1"}  # the asked node's own view (no asking the leader)


def test_a_redelivery_after_failover_carries_its_delivery_count(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("dc", durable=True, arguments=QUORUM)
        publish(n1, "dc", [b"m"])
        conn = pika.BlockingConnection(pika.URLParameters(n2.url))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=10)
        seen = []
        for method, props, _raw in ch.consume("dc", inactivity_timeout=5):
            assert method is not None, seen
            seen.append(((props.headers or {}).get("x-delivery-count"), method.redelivered))
            if len(seen) == 3:
                break
            ch.basic_nack(method.delivery_tag, requeue=True)
        assert seen == [(0, False), (1, True), (2, True)], seen
        # the third delivery's record reaches the followers within a loop turn or two
        conn.sleep(0.5)
        n1.kill()  # the leader; the third delivery is never acked
        after = None
        for method, props, raw in ch.consume("dc", inactivity_timeout=15):
            assert method is not None, "no redelivery after the failover"
            after = ((props.headers or {}).get("x-delivery-count"), method.redelivered, raw)
            ch.basic_ack(method.delivery_tag)
            break
        assert after == (3, True, b"m"), after
        conn.close()
    finally:
        for n in (n1, n2, n3):
            n.kill()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log


def online(server: RoostProcess, queue: str) -> list[str]:
    shown = httpx.get(
        f"{server.http_url}/api/queues/%2F/{queue}", auth=("guest", "guest"), headers=LOCAL
    )
    assert shown.status_code == 200, shown.text
    return sorted(shown.json()["online"])


def has_lease(etcd: EtcdServer, prefix: str, name: str) -> bool:
    """The node's membership key is there: the cluster counts it as running."""

    async def read() -> bool:
        c = Coordinator([("127.0.0.1", etcd.client_port)], timeout=2.0)
        try:
            return await c.get(f"{prefix}/nodes/live/{name}") is not None
        finally:
            await c.close()

    return asyncio.run(read())


def test_online_on_every_node_means_in_sync(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    # n3 keeps its lease for 30 s while stopped: still running to the cluster
    ttl = {"n1": TTL, "n2": TTL, "n3": ("--cluster-lease-ttl", "30")}
    nodes = [
        node(shared_etcd, tmp_path / name, name, *ttl[name], prefix=etcd_prefix) for name in ttl
    ]
    n1, n2, n3 = nodes
    for n in nodes:
        n.start()
    for other in ("n2", "n3"):
        n1.wait_for_log(f"link with {other} up")
    n2.wait_for_log("link with n3 up")
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("s", durable=True, arguments=QUORUM)
        publish(n1, "s", [b"x"] * 5)
        for server in nodes:
            eventually(lambda s=server: online(s, "s") == ["n1", "n2", "n3"], 10)  # type: ignore[misc]
        assert n3.proc is not None
        os.kill(n3.proc.pid, signal.SIGSTOP)
        try:
            stopped = time.monotonic()
            publish(n1, "s", [b"y"] * 20)  # a majority (n1, n2) confirms; n3 falls behind
            # n2's own view (from the leader's group record): n3 is not in sync...
            eventually(lambda: online(n2, "s") == ["n1", "n2"], 10)
            # ...while n3 is still running as far as the cluster knows
            assert has_lease(shared_etcd, etcd_prefix, "n3")
            assert time.monotonic() - stopped < 20
        finally:
            os.kill(n3.proc.pid, signal.SIGCONT)
        # resumed, n3 catches up and is in sync again on every node
        for server in nodes:
            eventually(lambda s=server: online(s, "s") == ["n1", "n2", "n3"], 15)  # type: ignore[misc]
    finally:
        for n in nodes:
            n.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log
