"""Real ``roost server`` processes joined through a real etcd: joining before listening,
membership seen by every node, kill -9 seen within the lease, a restart rejoining at
once, clear refusals when etcd is out of reach or the name is taken."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer, free_port
from tests.cluster.conftest import node
from tests.cluster.nodes import etcd_keys
from tests.support import RoostProcess


def test_three_nodes_join_and_a_killed_one_is_seen_down(etcd: EtcdServer, tmp_path: Path) -> None:
    nodes = [node(etcd, tmp_path / f"n{i}", f"n{i}") for i in (1, 2, 3)]
    try:
        for n in nodes:
            n.start()
        for n in nodes:
            n.wait_for_log("joined the cluster")
        n1, n2, n3 = nodes
        n1.wait_for_log("link with n3 up")
        n3.wait_for_log("link with n2 up")
        keys = etcd_keys(etcd, "/c/nodes/live/")
        assert sorted(keys) == ["/c/nodes/live/n1", "/c/nodes/live/n2", "/c/nodes/live/n3"]
        assert keys["/c/nodes/live/n2"]["amqp_port"] == n2.amqp_port
        # joined before listening: the log says so in that order
        log = n1.log
        assert log.index("joined the cluster as 'n1'") < log.index("AMQP 0-9-1 listening")
        killed = time.monotonic()
        n2.kill()
        n1.wait_for_log("link with n2 down", timeout=3)
        n1.wait_for_log("node 'n2' is down", timeout=10)
        n3.wait_for_log("node 'n2' is down", timeout=10)
        assert time.monotonic() - killed < 10  # the contract's bound for basic.cancel
        assert "/c/nodes/live/n2" not in etcd_keys(etcd, "/c/nodes/live/")
        assert "/c/nodes/known/n2" in etcd_keys(etcd, "/c/nodes/known/")
        # the others keep serving clients
        with pika.BlockingConnection(pika.URLParameters(n3.url)) as conn:
            conn.channel().queue_declare("still-serving")
        # n2 comes back at once: it revokes its previous lease from its data dir
        again = RoostProcess(n2.data_dir, *n2.extra)
        started = time.monotonic()
        again.start()
        assert time.monotonic() - started < 5, again.log
        nodes[1] = again
        n1.wait_for_log("node 'n2' is up", timeout=5)
        n1.wait_for_log("link with n2 up", timeout=5)
    finally:
        for n in nodes:
            n.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def run_server(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roost", "server", "--stomp-port", "0", "--ws-port", "0",
         "--mqtt-port", "0", "--mqtt-ws-port", "0", "--stream-port", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_unreachable_etcd_stops_the_start_before_any_listener(tmp_path: Path) -> None:
    amqp = free_port()
    done = run_server(
        "--cluster",
        f"etcd://127.0.0.1:{free_port()}",
        "--node-name",
        "lonely",
        "--data-dir",
        str(tmp_path),
        "--amqp-port",
        str(amqp),
        "--http-port",
        "0",
        "--cluster-port",
        str(free_port()),
    )
    assert done.returncode == 2
    assert "roost: etcd unreachable at 127.0.0.1:" in done.stderr
    assert "listening" not in done.stderr + done.stdout


def test_a_name_held_by_a_running_node_is_refused(etcd: EtcdServer, tmp_path: Path) -> None:
    first = node(etcd, tmp_path / "a", "twin", "--cluster-lease-ttl", "2").start()
    try:
        done = run_server(
            "--cluster",
            etcd.url("/c"),
            "--node-name",
            "twin",
            "--cluster-lease-ttl",
            "2",
            "--data-dir",
            str(tmp_path / "b"),
            "--amqp-port",
            str(free_port()),
            "--http-port",
            "0",
            "--cluster-port",
            str(free_port()),
        )
        assert done.returncode == 2
        assert "node name 'twin' is in use by a running node" in done.stderr
    finally:
        first.kill()
