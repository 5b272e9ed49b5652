"""A node cut off from etcd (and only from etcd: its clients and peers still reach it)
fences itself: once its lease has gone unrenewed for the TTL less a margin, before etcd
can expire the lease and another node can win its election keys, it stops the dynamic
shovels it runs. Seen by the shovel's effect: it moves messages from an exchange of
another broker (each runner binds a queue of its own there, so two runners would move
every message twice), and every message lands at most once, moved first by the cut-off
node and then only by the node that took over, never by both in turn.

The cut: the node reaches etcd through a forwarder of its own (``tcp_proxy.py``), which
the test stops with SIGSTOP (nothing closed, requests hang) and continues with SIGCONT."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from itertools import groupby
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.management_api import put, shovel_rows
from tests.cluster.tcp_proxy import Proxy
from tests.support import RoostProcess, eventually, free_port

TTL = ("--cluster-lease-ttl", "2")


class Landed:
    """The destination queue's consumer: each message's body and the node that moved it
    (RabbitMQ's ``x-shovelled`` header, ``shovelled-by``), in arrival order."""

    def __init__(self, broker: RoostProcess) -> None:
        self.rows: list[tuple[bytes, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(broker,), daemon=True)
        self._thread.start()

    def _run(self, broker: RoostProcess) -> None:
        with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
            ch = conn.channel()
            for _m, props, body in ch.consume("out", auto_ack=True, inactivity_timeout=0.1):
                if self._stop.is_set():
                    break
                if body is not None:
                    by = props.headers["x-shovelled"][-1]["shovelled-by"]
                    self.rows.append((body, by.decode() if isinstance(by, bytes) else by))

    def by(self, name: str) -> int:
        return sum(1 for _b, n in list(self.rows) if n == name)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


class Publisher:
    """Numbered messages to the source broker's ``amq.fanout``, one every few ms."""

    def __init__(self, broker: RoostProcess) -> None:
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(broker,), daemon=True)
        self._thread.start()

    def _run(self, broker: RoostProcess) -> None:
        with pika.BlockingConnection(pika.URLParameters(broker.url)) as conn:
            ch = conn.channel()
            while not self._stop.is_set():
                ch.basic_publish("amq.fanout", "", b"m%d" % self.sent)
                self.sent += 1
                conn.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def test_a_node_cut_off_from_etcd_stops_its_shovel_before_another_takes_it(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    source = RoostProcess(tmp_path / "source").start()
    proxy = Proxy(shared_etcd.host, shared_etcd.client_port)
    cut_off = RoostProcess(
        tmp_path / "n1", "--cluster", f"etcd://127.0.0.1:{proxy.port}{etcd_prefix}",
        "--node-name", "n1", "--cluster-port", str(free_port()), *TTL,
    )  # fmt: skip
    nodes = [cut_off]
    landed: Landed | None = None
    publisher: Publisher | None = None
    try:
        cut_off.start()
        with pika.BlockingConnection(pika.URLParameters(source.url)) as conn:
            conn.channel().queue_declare("out")
        value = {"src-uri": source.url, "src-exchange": "amq.fanout", "dest-uri": source.url,
                 "dest-queue": "out", "dest-add-forward-headers": True}  # fmt: skip
        put(cut_off, "/api/parameters/shovel/%2F/moved", {"value": value})
        eventually(lambda: shovel_rows(cut_off) == ["moved"], 20)
        other = node(shared_etcd, tmp_path / "n2", "n2", *TTL, prefix=etcd_prefix).start()
        nodes.append(other)  # a node joining does not take a running shovel over

        landed, publisher = Landed(source), Publisher(source)
        eventually(lambda: landed.by("n1") >= 20, 20, "n1 never moved a message")
        os.kill(proxy.process.pid, signal.SIGSTOP)  # n1 no longer reaches etcd
        cut_at = time.monotonic()
        eventually(lambda: landed.by("n2") >= 1, 30, "n2 never took the shovel over")
        took = landed.by("n2")
        # long enough for a second runner to show: n1, unfenced, would move each of these too
        eventually(lambda: landed.by("n2") >= took + 100, 30, "n2 stopped moving")
        assert time.monotonic() - cut_at < 25
        os.kill(proxy.process.pid, signal.SIGCONT)  # healed: n1 registers again
        cut_off.wait_for_log("registered again as 'n1'", 30)
        eventually(lambda: landed.by("n2") >= took + 200, 30, "n2 stopped moving")
        publisher.stop()
        time.sleep(0.5)  # what was published last is moved (by n2) before the consumer stops
        landed.stop()

        rows = list(landed.rows)
        twice = [body for body, count in Counter(b for b, _n in rows).items() if count > 1]
        assert twice == [], f"{len(twice)} message(s) moved twice"
        movers = [name for name, _run in groupby(n for _b, n in rows)]
        assert movers == ["n1", "n2"], "the shovel ran on both nodes in turn"
        assert "stopping its elected roles" in cut_off.log
        assert shovel_rows(cut_off) == [] and shovel_rows(other) == ["moved"]
    finally:
        for helper in (publisher, landed):
            if helper is not None:
                helper.stop()
        os.kill(proxy.process.pid, signal.SIGCONT)
        for n in nodes:
            n.kill()
        proxy.kill()
        source.kill()
