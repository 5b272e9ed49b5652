"""kill -9 of etcd under load: two nodes keep taking publishes with confirms and
delivering them while etcd is down and after it restarts; the history checker finds no
confirmed message lost, and both nodes are registered again afterwards."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.history import History
from tests.cluster.nodes import etcd_keys
from tests.confirming import publish_recorded
from tests.support import RoostProcess, eventually

MESSAGES = 1500


def publisher(server: RoostProcess, name: str, queue: str, h: History) -> None:
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True)
        ch.confirm_delivery()
        for seq in range(MESSAGES):
            publish_recorded(ch, h, name, queue, seq, 256)
            if seq % 100 == 0:
                time.sleep(0.02)  # spread the load over the etcd outage


def consumer(server: RoostProcess, queue: str, h: History, stop: threading.Event) -> None:
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=True)
        ch.basic_qos(prefetch_count=50)
        for method, _props, raw in ch.consume(queue, inactivity_timeout=0.2):
            if method is None:
                if stop.is_set():
                    break
                continue
            h.ack(h.deliver(queue, raw, method.redelivered))
            ch.basic_ack(method.delivery_tag)
        ch.cancel()


def test_etcd_killed_and_restarted_under_load_loses_nothing(
    etcd: EtcdServer, tmp_path: Path
) -> None:
    n1 = node(etcd, tmp_path / "n1", "n1").start()
    n2 = node(etcd, tmp_path / "n2", "n2").start()
    h = History()
    stop = threading.Event()
    try:
        threads = [
            threading.Thread(target=consumer, args=(n1, "load-1", h, stop)),
            threading.Thread(target=consumer, args=(n2, "load-2", h, stop)),
            threading.Thread(target=publisher, args=(n1, "p1", "load-1", h)),
            threading.Thread(target=publisher, args=(n2, "p2", "load-2", h)),
        ]
        for t in threads:
            t.start()
        eventually(lambda: len(h.confirmed) > 300, 20, "publishing never got going")
        etcd.kill()
        down_at = len(h.confirmed)
        eventually(lambda: len(h.confirmed) > down_at + 300, 20, "no confirms while etcd was down")
        etcd.start()
        for t in threads[2:]:
            t.join(60)
        eventually(lambda: len(h.deliveries) >= len(h.confirmed), 30, lambda: h.problems())
        stop.set()
        for t in threads[:2]:
            t.join(10)
        assert h.problems() == []
        assert len(h.confirmed) == 2 * MESSAGES and not h.nacked
        # both nodes hold their registration again once etcd is back
        eventually(
            lambda: (
                sorted(etcd_keys(etcd, "/c/nodes/live/"))
                == ["/c/nodes/live/n1", "/c/nodes/live/n2"]
            ),
            15,
        )
    finally:
        stop.set()
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log
