"""A node killed with kill -9: nothing confirmed is lost, and clients of its queues on the
other nodes get RabbitMQ's answers (basic.cancel, a 404 naming the home node, nacks)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.history import History
from tests.confirming import publish_recorded
from tests.support import RoostProcess, eventually

TTL = ("--cluster-lease-ttl", "2")


def publisher(server: RoostProcess, name: str, queue: str, h: History, count: int) -> None:
    try:
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for seq in range(count):
                publish_recorded(ch, h, name, queue, seq, 256)
    except pika.exceptions.AMQPError:
        pass  # its node was killed: what it had confirmed is what counts


def consumer(
    server: RoostProcess,
    queue: str,
    h: History,
    stop: threading.Event,
    label: str,
    record_acks: bool = True,
) -> None:
    """``record_acks`` False for a consumer whose node is killed: an ack in flight when
    the node dies never arrived, so its message is rightly delivered again."""
    try:
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=20)
            for method, _props, raw in ch.consume(queue, inactivity_timeout=0.2):
                if method is None:
                    if stop.is_set():
                        break
                    continue
                delivered = h.deliver(label, raw, method.redelivered)
                if record_acks:
                    h.ack(delivered)
                ch.basic_ack(method.delivery_tag)
    except pika.exceptions.AMQPError:
        pass


def test_kill_9_of_a_non_home_node_loses_nothing_confirmed(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    home = node(shared_etcd, tmp_path / "home", "home", *TTL, prefix=etcd_prefix).start()
    other = node(shared_etcd, tmp_path / "other", "other", *TTL, prefix=etcd_prefix).start()
    try:
        with pika.BlockingConnection(pika.URLParameters(home.url)) as conn:
            conn.channel().queue_declare("work", durable=True)
        h = History()
        stop = threading.Event()
        threads = [
            threading.Thread(target=consumer, args=(home, "work", h, stop, "at-home")),
            # a consumer on the node that dies: what it held unacked goes back home
            threading.Thread(target=consumer, args=(other, "work", h, stop, "elsewhere", False)),
            threading.Thread(target=publisher, args=(other, "p-other", "work", h, 100_000)),
            threading.Thread(target=publisher, args=(home, "p-home", "work", h, 1500)),
        ]
        for t in threads:
            t.start()
        eventually(lambda: len(h.confirmed) > 800, 30, "publishing never got going")
        other.kill()  # kill -9, mid-stream: forwarded publishes and remote deliveries
        threads[3].join(60)
        eventually(
            lambda: h.confirmed <= {m for _q, m, _r in h.deliveries}, 30, lambda: h.problems()
        )
        stop.set()
        for t in threads:
            t.join(10)
        # every message the dead node confirmed had reached the home node's disk
        assert h.problems() == []
        assert any(m[0] == "p-other" for m in h.confirmed)
        assert not h.nacked
    finally:
        stop.set()
        home.kill()
        other.kill()
    assert "Traceback" not in home.log, home.log


def test_kill_9_of_the_home_node(shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path) -> None:
    home = node(shared_etcd, tmp_path / "home", "home", *TTL, prefix=etcd_prefix).start()
    other = node(shared_etcd, tmp_path / "other", "other", *TTL, prefix=etcd_prefix).start()
    try:
        with pika.BlockingConnection(pika.URLParameters(home.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("orders", durable=True)
            ch.confirm_delivery()
            for i in range(50):
                ch.basic_publish(
                    "", "orders", f"o{i}".encode(), pika.BasicProperties(delivery_mode=2)
                )
        conn2 = pika.BlockingConnection(pika.URLParameters(other.url))
        ch2 = conn2.channel()
        cancelled = threading.Event()
        ch2.add_on_cancel_callback(lambda _frame: cancelled.set())
        ch2.basic_qos(prefetch_count=10)
        got: list[bytes] = []
        ch2.basic_consume("orders", lambda ch, m, p, b: got.append(b))  # never acks
        eventually(lambda: (conn2.process_data_events(0.05), len(got) == 10)[1], 10)
        home.kill()
        killed = time.monotonic()
        deadline = killed + 10
        while not cancelled.is_set() and time.monotonic() < deadline:
            conn2.process_data_events(0.1)
        assert cancelled.is_set(), "no basic.cancel within 10 s of the home node's death"
        # the management API still shows the queue, as down (RabbitMQ's state)
        shown = httpx.get(f"{other.http_url}/api/queues/%2F/orders", auth=("guest", "guest"))
        assert shown.status_code == 200 and shown.json()["state"] == "down", shown.text
        # its queue is unavailable: a 404 naming the home node, and publishes are nacked
        ch3 = conn2.channel()
        try:
            ch3.queue_declare("orders", durable=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            assert exc.reply_code == 404
            assert "home node 'home' of durable queue 'orders'" in exc.reply_text
        else:
            raise AssertionError("declaring a queue whose home node is down succeeded")
        ch4 = conn2.channel()
        ch4.confirm_delivery()
        try:
            ch4.basic_publish("", "orders", b"late", pika.BasicProperties(delivery_mode=2))
        except pika.exceptions.NackError:
            pass
        else:
            raise AssertionError("a publish to a queue whose home node is down was confirmed")
        conn2.close()
        # the home node comes back with every confirmed message (the 10 the other node
        # held unacked are back in the queue too)
        home.start()
        other.wait_for_log("link with home up", timeout=10)
        with pika.BlockingConnection(pika.URLParameters(other.url)) as conn:
            ch = conn.channel()
            bodies = []
            for method, _props, raw in ch.consume("orders", inactivity_timeout=1):
                if method is None:
                    break
                bodies.append(raw)
                ch.basic_ack(method.delivery_tag)
            assert sorted(bodies) == sorted(f"o{i}".encode() for i in range(50))
    finally:
        home.kill()
        other.kill()
    assert "Traceback" not in other.log, other.log
