"""``roost cluster up``: a local etcd and N nodes on one machine, sharing the client ports.

Every node is a ``roost server`` process with its own data dir (``DIR/nodeK``) and its own
cluster port, and opens the AMQP, STOMP, WebSocket and HTTP ports with SO_REUSEPORT, so
the kernel spreads incoming connections over the nodes while clients keep connecting to
``:5672``. The nodes' output is shown with their names in front; Ctrl-C (or SIGTERM) stops
the nodes gracefully, then etcd.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from roost.cluster.etcd_server import EtcdServer, find_etcd

READY = "Roost ready"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nodes", type=int, default=os.cpu_count() or 1, help="nodes to start (default: cores)"
    )
    parser.add_argument("--data-dir", default="./data-cluster", help="etcd's and each node's data")
    parser.add_argument(
        "--etcd",
        metavar="URL",
        help="use this etcd (etcd://HOST:PORT[,…][/PREFIX]) instead of starting one",
    )
    parser.add_argument("--etcd-port", type=int, default=2379, help="the local etcd's port")
    parser.add_argument("--bind", default="127.0.0.1", help="address of every listener")
    parser.add_argument("--amqp-port", type=int, default=5672)
    parser.add_argument("--stomp-port", type=int, default=61613)
    parser.add_argument("--ws-port", type=int, default=15674)
    parser.add_argument("--mqtt-port", type=int, default=1883)
    parser.add_argument("--mqtt-ws-port", type=int, default=15675)
    parser.add_argument("--stream-port", type=int, default=5552)
    parser.add_argument("--http-port", type=int, default=15672)
    parser.add_argument(
        "--prometheus-port",
        type=int,
        default=15692,
        help="node K serves its own metrics on this port + K - 1 (0: none)",
    )
    parser.add_argument(
        "--cluster-port", type=int, default=5679, help="node K links on this port + K - 1"
    )
    parser.add_argument(
        "--name", default="roost", help="node K is NAME<K>@HOSTNAME (default roost)"
    )
    parser.add_argument(
        "server_args",
        nargs=argparse.REMAINDER,
        help="after --: more arguments for every node's 'roost server'",
    )


class LocalCluster:
    def __init__(self, args: argparse.Namespace, out: IO[str] = sys.stdout) -> None:
        self.args = args
        self.out = out
        self.data_dir = Path(args.data_dir)
        self.etcd: EtcdServer | None = None
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.ready: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            self.out.write(line if line.endswith("\n") else line + "\n")
            self.out.flush()

    def url(self) -> str:
        if self.args.etcd:
            return str(self.args.etcd)
        assert self.etcd is not None
        return self.etcd.url()

    def node_names(self) -> list[str]:
        host = platform.node() or "localhost"
        return [f"{self.args.name}{k}@{host}" for k in range(1, self.args.nodes + 1)]

    def start(self) -> None:
        if not self.args.etcd:
            if find_etcd() is None:
                raise FileNotFoundError(
                    "etcd is not installed (Debian: apt-get install etcd-server), or pass --etcd"
                )
            self.etcd = EtcdServer(self.data_dir / "etcd", client_port=self.args.etcd_port)
            self.etcd.start()
            self.say(f"[etcd] listening on {self.etcd.endpoint} (data in {self.etcd.data_dir})")
        extra = [a for a in self.args.server_args if a != "--"]
        for k, name in enumerate(self.node_names(), start=1):
            command = [
                sys.executable, "-m", "roost", "server",
                "--cluster", self.url(),
                "--node-name", name,
                "--cluster-port", str(self.args.cluster_port + k - 1),
                "--data-dir", str(self.data_dir / f"node{k}"),
                "--bind", self.args.bind,
                "--amqp-port", str(self.args.amqp_port),
                "--stomp-port", str(self.args.stomp_port),
                "--ws-port", str(self.args.ws_port),
                "--mqtt-port", str(self.args.mqtt_port),
                "--mqtt-ws-port", str(self.args.mqtt_ws_port),
                "--stream-port", str(self.args.stream_port),
                "--http-port", str(self.args.http_port),
                # metrics are one node's each: a port per node, not a shared one
                "--prometheus-port",
                str(self.args.prometheus_port + k - 1 if self.args.prometheus_port else 0),
                "--reuse-port",
                *extra,
            ]  # fmt: skip
            proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            self.procs[name] = proc
            self.ready[name] = threading.Event()
            threading.Thread(target=self._pump, args=(name, proc), daemon=True).start()

    def _pump(self, name: str, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        short = name.split("@")[0]
        for line in proc.stdout:
            self.say(f"[{short}] {line}")
            if READY in line:
                self.ready[name].set()
        code = proc.wait()
        self.say(f"[{short}] exited with code {code}")

    def wait_ready(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        for name, event in self.ready.items():
            while not event.wait(0.1):
                if self.procs[name].poll() is not None or time.monotonic() > deadline:
                    return False
        return True

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.etcd is not None:
            self.etcd.stop()


def run(args: argparse.Namespace) -> int:
    if args.nodes < 1:
        print("roost: --nodes must be at least 1", file=sys.stderr)
        return 2
    cluster = LocalCluster(args)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        cluster.start()
        if not cluster.wait_ready():
            print("roost: a node did not start (its output is above)", file=sys.stderr)
            return 1
        a = args
        cluster.say(
            f"cluster up: {a.nodes} node(s) sharing AMQP {a.bind}:{a.amqp_port}, "
            f"STOMP {a.stomp_port}, WebSocket {a.ws_port}, management "
            f"http://{a.bind}:{a.http_port}/ ; coordinator {cluster.url()} ; Ctrl-C stops it"
        )
        while not stop.wait(0.5):
            if all(p.poll() is not None for p in cluster.procs.values()):
                return 1
        return 0
    except (OSError, RuntimeError) as exc:
        print(f"roost: {exc}", file=sys.stderr)
        return 2
    finally:
        cluster.stop()
