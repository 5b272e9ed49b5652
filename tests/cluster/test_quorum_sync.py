"""What a replicated quorum queue keeps across a failover and shows on every node, on 3
real nodes and a real etcd: a message's delivery count (``x-delivery-count`` and
``redelivered`` after the leader's kill -9), and ``online`` = the members in sync, not
merely running (a follower stopped with SIGSTOP keeps its lease but drops out)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pika

from roost.cluster.coordinator import Coordinator
from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.history import History
from tests.cluster.nodes import TTL, queue_json, three_nodes
from tests.cluster.quorum_queues import (
    LOCAL,
    QUORUM,
    consumer,
    own_leader,
    publish,
    publisher,
    ui_replicas,
    wind_down,
)
from tests.support import RoostProcess, eventually


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
            ui_replicas(n2, "s")  # and the web UI's queue page says so
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


def test_a_paused_leader_resumed_commits_nothing(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    """SIGSTOP of the leader under load (a partition: the others cannot tell a paused
    process from a cut-off one): a member takes over once its lease expires; SIGCONT: a
    publisher connected to the old leader all along gets nothing confirmed there that the
    new leader does not hold (the members refuse its term), and the history checker
    finds every confirmed message delivered, order kept, and nothing acked delivered
    again: the consumer (on n3, fed from the leader) acks everything all along, so acks
    are on their way to the leader when it stops and go to it while it is stopped."""
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    h = History()
    stop, hold, failed_over = threading.Event(), threading.Event(), threading.Event()
    stop_publishing = threading.Event()
    times: list[tuple[float, float]] = []
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("work", durable=True, arguments=QUORUM)
        threads = [
            threading.Thread(target=publisher, args=(n2, "p", "work", h, stop_publishing, times)),
            # connected to the leader itself: what it confirms after SIGCONT is checked too
            threading.Thread(target=publisher, args=(n1, "o", "work", h, stop_publishing, [])),
            # every ack is recorded, those sent to the paused leader too (the next leader
            # applies them: cluster/quorum/standin.py)
            threading.Thread(target=consumer, args=(n3, "work", h, stop, hold, failed_over, [])),
        ]
        for t in threads:
            t.start()
        eventually(lambda: len(h.acked) > 200, 30, "publishing never got going")
        assert n1.proc is not None  # paused mid-stream, acks in flight (hold is never set)
        os.kill(n1.proc.pid, signal.SIGSTOP)
        try:
            confirmed_before = len(h.confirmed)
            eventually(lambda: len(h.confirmed) > confirmed_before + 200, 30, "no failover")
            assert queue_json(n2, "work")["leader"] in ("n2", "n3")
            # n3's own stand-in points at the new leader (its consumer is fed from there)
            eventually(lambda: own_leader(n3, "work") in ("n2", "n3"), 10)
            failed_over.set()
        finally:
            os.kill(n1.proc.pid, signal.SIGCONT)
        # the old leader resumes with its clients' publishes queued up: it stands down
        eventually(lambda: queue_json(n1, "work")["leader"] in ("n2", "n3"), 15)
        confirmed_before = len(h.confirmed)
        eventually(lambda: len(h.confirmed) > confirmed_before + 100, 30, "stalled after SIGCONT")
        wind_down(h, threads[:2], threads[2], stop, stop_publishing)
        assert h.problems() == [], h.problems()
        assert any(m[0] == "o" for m in h.confirmed)  # the old leader's publisher got going
    finally:
        stop.set()
        stop_publishing.set()
        for n in (n1, n2, n3):
            n.kill()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log
