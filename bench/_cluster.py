"""Clusters for the benchmarks: N Roost nodes joined through a local etcd, and N RabbitMQ
nodes joined with ``rabbitmqctl join_cluster``; everything on loopback in a temp dir.

Each launcher is a context manager yielding one AMQP URL per node (node 1 first)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _brokers import (
    RABBITMQ_BIN,
    _epmd_running,
    _roost_command,
    _tail,
    _wait_for_port,
    free_port,
    rabbitmq_env,
    rabbitmq_installed,
)

from roost.cluster.etcd_server import EtcdServer


class NodeUrls(list[str]):
    """One AMQP URL per node, and the nodes' process ids (with a shared port the URL
    cannot tell which process answers)."""

    pids: list[int]


def _wait_for_ready(proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    """A node sharing its port is ready once it logs so (the port answers earlier: the
    nodes before it listen on it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}:\n{_tail(log)}")
        if b"Roost ready" in log.read_bytes():
            return
        time.sleep(0.1)
    raise RuntimeError(f"node not ready after {timeout:g} s:\n{_tail(log)}")


@contextlib.contextmanager
def roost_cluster(
    nodes: int, *extra: str, timeout: float = 30.0, shared_port: bool = False
) -> Iterator[NodeUrls]:
    """A local etcd and ``nodes`` Roost nodes, each on its own AMQP port (so a client can
    choose its node); ``nodes`` 1 is a single node without etcd, today's default.
    ``shared_port``: every node listens on one AMQP port with SO_REUSEPORT, as
    ``roost cluster up`` does, and the kernel spreads the connections over them."""
    with tempfile.TemporaryDirectory(prefix="bench-roost-cluster-") as tmp:
        base = Path(tmp)
        etcd = EtcdServer(base / "etcd").start() if nodes > 1 else None
        procs: list[subprocess.Popen[bytes]] = []
        urls = NodeUrls()
        shared = free_port()
        try:
            for k in range(1, nodes + 1):
                port = shared if shared_port else free_port()
                log = base / f"node{k}.log"
                cluster = (
                    ["--cluster", etcd.url(), "--node-name", f"bench{k}",
                     "--cluster-port", str(free_port())]
                    if etcd is not None else []
                )  # fmt: skip
                cmd = [*_roost_command(), "server", "--amqp-port", str(port), "--http-port", "0",
                       "--stomp-port", "0", "--ws-port", "0",
                       "--mqtt-port", "0", "--mqtt-ws-port", "0", "--stream-port", "0",
                       "--prometheus-port", "0",
                       "--log-level", "info" if shared_port else "warning",
                       *(["--reuse-port"] if shared_port else []),
                       "--data-dir", str(base / f"node{k}"), *cluster, *extra]  # fmt: skip
                with open(log, "wb") as out:
                    procs.append(
                        subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
                    )
                if shared_port:
                    _wait_for_ready(procs[-1], timeout, log)
                else:
                    _wait_for_port(port, procs[-1], timeout, log)
                urls.append(f"amqp://guest:guest@127.0.0.1:{port}/%2F")
            urls.pids = [p.pid for p in procs]
            yield urls
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if etcd is not None:
                etcd.stop()


@contextlib.contextmanager
def rabbitmq_cluster(nodes: int, timeout: float = 90.0) -> Iterator[list[str]]:
    """``nodes`` RabbitMQ nodes with their own names and ports, sharing an Erlang cookie,
    nodes 2.. joined to node 1 (``stop_app``, ``join_cluster``, ``start_app``)."""
    if not rabbitmq_installed():
        raise RuntimeError("rabbitmq-server is not installed")
    with tempfile.TemporaryDirectory(prefix="bench-rabbitmq-cluster-") as tmp:
        base = Path(tmp)
        home = base / "home"
        home.mkdir()
        cookie = home / ".erlang.cookie"
        cookie.write_text(os.urandom(16).hex().upper())
        cookie.chmod(0o400)
        epmd_was_running = _epmd_running()
        started: list[tuple[subprocess.Popen[bytes], dict[str, str], list[str]]] = []
        urls: list[str] = []
        names = [f"bench{k}-{os.getpid()}@localhost" for k in range(1, nodes + 1)]
        try:
            for k, node in enumerate(names, start=1):
                port, dist = free_port(), free_port()
                nbase = base / f"node{k}"
                env = rabbitmq_env(nbase, node, port, dist, home=home)
                ctl = [str(RABBITMQ_BIN / "rabbitmqctl"), "-n", node]
                log = nbase / "server.log"
                with open(log, "wb") as out:
                    proc = subprocess.Popen([str(RABBITMQ_BIN / "rabbitmq-server")], env=env,
                                            stdout=out, stderr=subprocess.STDOUT, cwd=nbase)
                started.append((proc, env, ctl))
                try:
                    subprocess.run(
                        [*ctl, "wait", env["RABBITMQ_PID_FILE"], "--timeout", str(int(timeout))],
                        env=env, check=True, capture_output=True, timeout=timeout + 10,
                    )  # fmt: skip
                    if k > 1:
                        for step in (["stop_app"], ["join_cluster", names[0]], ["start_app"]):
                            subprocess.run([*ctl, *step], env=env, check=True,
                                           capture_output=True, timeout=timeout)
                except subprocess.CalledProcessError as exc:
                    raise RuntimeError(
                        f"RabbitMQ node {node} did not start or join: {exc.stderr!r}\n{_tail(log)}"
                    ) from None
                _wait_for_port(port, proc, 30, log)
                urls.append(f"amqp://guest:guest@127.0.0.1:{port}/%2F")
            yield urls
        finally:
            for proc, env, ctl in reversed(started):
                with contextlib.suppress(subprocess.SubprocessError, OSError):
                    subprocess.run([*ctl, "stop"], env=env, capture_output=True, timeout=60)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if not epmd_was_running and started:
                subprocess.run(["epmd", "-kill"], env=started[0][1], capture_output=True,
                               check=False)  # fmt: skip
