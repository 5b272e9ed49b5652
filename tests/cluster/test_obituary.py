"""A node whose process dies is down at once, not a lease TTL later (``obituary.py``), on
3 real nodes and a real etcd, with a lease of 60 s that would otherwise decide: n1 leads a
quorum queue and is killed with kill -9; its peers find its cluster port refusing, revoke
its lease, and a publish through n2 is confirmed by the new leader long before the lease
could have run out. A paused process (SIGSTOP) still accepts connections, so its peers
leave it registered: only the lease can say it is down."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.history import History
from tests.cluster.nodes import three_nodes
from tests.cluster.quorum_queues import QUORUM, checked, own_leader
from tests.cluster.test_quorum_deposed import confirmed
from tests.cluster.test_quorum_full_restart import consume_rest
from tests.confirming import publish_recorded
from tests.support import eventually

LONG = ("--cluster-lease-ttl", "60")


def test_a_killed_leaders_node_is_down_at_once_and_its_queue_fails_over(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path, LONG)
    n1, n2, n3 = nodes
    h = History()
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("work", durable=True, arguments=QUORUM)
        eventually(lambda: own_leader(n1, "work") == "n1", what="n1 leads")
        confirmed(n1, h, "before", 100)
        n1.kill()  # kill -9
        killed = time.monotonic()
        n2.wait_for_log("node 'n1' is down", timeout=30)
        assert "its process is gone; revoking its lease" in n2.log + n3.log
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            seq = 0  # nacked while no leader is elected: published again, as a client does
            while not h.confirmed & {("after", k) for k in range(seq)} and seq < 300:
                publish_recorded(ch, h, "after", "work", seq, 256)
                seq += 1
                if ("after", seq - 1) in h.nacked:
                    conn.sleep(0.1)
        took = time.monotonic() - killed
        assert h.confirmed & {("after", k) for k in range(seq)}, h.nacked
        assert took < 30, f"confirmed {took:.1f} s after the kill: the lease decided"
        print(f"kill -9 of the leader to a confirm through n2: {took:.2f} s (lease TTL 60 s)")
        consume_rest(n2, "work", h)
        checked(h)
    finally:
        for n in nodes:
            n.kill()


def test_a_paused_node_stays_registered_until_its_lease_says(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path, LONG)
    n1, n2, n3 = nodes
    assert n3.proc is not None
    try:
        os.kill(n3.proc.pid, signal.SIGSTOP)
        n2.wait_for_log("link with n3 down", timeout=30)  # its heartbeat stopped
        # n2 knocked, and the paused process's kernel accepted: n3 stays registered
        n2.wait_for_log("node 'n3' still accepts on its cluster port", timeout=10)
        assert "node 'n3' is down" not in n2.log
        assert "revoking its lease" not in n2.log + n1.log
    finally:
        if n3.proc is not None and n3.proc.poll() is None:
            os.kill(n3.proc.pid, signal.SIGCONT)
        for n in nodes:
            n.kill()
