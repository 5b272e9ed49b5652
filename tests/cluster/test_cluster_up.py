"""``roost cluster up``: a local etcd and two nodes sharing the client ports through
SO_REUSEPORT; the kernel spreads connections over both; SIGTERM stops all of it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pika

from roost.cluster.etcd_server import find_etcd, free_port
from tests.support import eventually, prerequisite


def free_pair() -> int:
    """A free port whose next one is free too (node K links on --cluster-port + K - 1)."""
    for _ in range(50):
        port = free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two consecutive free ports")


def test_two_nodes_share_the_ports(tmp_path: Path) -> None:
    if find_etcd() is None:
        prerequisite("etcd is not installed (scripts/test installs Debian's etcd-server)")
    amqp, http = free_port(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "roost", "cluster", "up", "--nodes", "2",
            "--data-dir", str(tmp_path),
            "--etcd-port", str(free_port()),
            "--amqp-port", str(amqp), "--http-port", str(http),
            "--stomp-port", str(free_port()), "--ws-port", str(free_port()),
            "--mqtt-port", "0", "--mqtt-ws-port", "0",
            "--stream-port", str(free_port()),
            "--cluster-port", str(free_pair()),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        with proc.stdout:
            lines.extend(proc.stdout)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        eventually(lambda: any("cluster up: 2 node(s)" in ln for ln in lines), 60, lambda: lines)
        # 20 connections to one port: both nodes get some (all on one: p = 2 * 2^-20)
        for _ in range(20):
            pika.BlockingConnection(
                pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{amqp}/%2F")
            ).close()
        opened = eventually(
            lambda: (
                {ln.split("]")[0] + "]" for ln in lines if "authenticated and granted access" in ln}
                if sum("authenticated and granted access" in ln for ln in lines) == 20
                else None
            ),
            10,
            lambda: lines,
        )
        assert opened == {"[roost1]", "[roost2]"}
        assert httpx.get(
            f"http://127.0.0.1:{http}/api/overview", auth=("guest", "guest")
        ).is_success
        assert (tmp_path / "node1").is_dir() and (tmp_path / "node2").is_dir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        reader.join(5)
        assert "[roost1] exited with code 0\n" in lines and "[roost2] exited with code 0\n" in lines
        assert not any("Traceback" in ln for ln in lines), "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
