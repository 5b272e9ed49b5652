"""Any node serves any client: publishes on one node reach queues homed on another
(confirmed after the home node's confirm), consumers on one node receive from queues
homed on another through a remote subscription (acks, rejects and requeues go home),
and a node's death is handled as RabbitMQ handles a classic queue's node going down."""

from __future__ import annotations

import threading

import pika

from tests.cluster.history import History
from tests.cluster.nodes import pair  # noqa: F401  (the fixture)
from tests.confirming import publish_recorded
from tests.support import RoostProcess, eventually

MESSAGES = 1000


def publisher(server: RoostProcess, name: str, queue: str, h: History) -> None:
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for seq in range(MESSAGES):
            publish_recorded(ch, h, name, queue, seq, 512)


def consumer(
    server: RoostProcess,
    queue: str,
    h: History,
    stop: threading.Event,
    counts: dict[int, int] | None = None,
) -> None:
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=50)
        for method, _props, raw in ch.consume(queue, inactivity_timeout=0.2):
            if method is None:
                if stop.is_set():
                    break
                continue
            if counts is not None:
                counts[server.amqp_port] = counts.get(server.amqp_port, 0) + 1
            # order is promised per consumer: each one's deliveries are checked apart
            h.ack(h.deliver(f"{queue}@{server.amqp_port}", raw, method.redelivered))
            ch.basic_ack(method.delivery_tag)
        ch.cancel()


def test_publish_on_either_node_consume_on_either_node(
    pair: tuple[RoostProcess, RoostProcess],  # noqa: F811
) -> None:
    n1, n2 = pair
    with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
        conn.channel().queue_declare("home-n1", durable=True)  # homed on n1
    h = History()
    stop = threading.Event()
    counts: dict[int, int] = {}
    threads = [
        # one consumer on the home node, one on the other; publishers on both
        threading.Thread(target=consumer, args=(n1, "home-n1", h, stop, counts)),
        threading.Thread(target=consumer, args=(n2, "home-n1", h, stop, counts)),
        threading.Thread(target=publisher, args=(n1, "p1", "home-n1", h)),
        threading.Thread(target=publisher, args=(n2, "p2", "home-n1", h)),
    ]
    for t in threads:
        t.start()
    for t in threads[2:]:
        t.join(120)
    eventually(lambda: len(h.acked) >= len(h.confirmed), 30, lambda: h.problems())
    stop.set()
    for t in threads[:2]:
        t.join(10)
    assert h.problems() == []
    assert len(h.confirmed) == 2 * MESSAGES and not h.nacked
    # both consumers took part (the one on n2 through its node's subscription at n1)
    assert counts.get(n1.amqp_port, 0) > 0 and counts.get(n2.amqp_port, 0) > 0, counts
    with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
        assert conn.channel().queue_declare("home-n1", passive=True).method.message_count == 0


def test_a_remote_consumer_acks_rejects_and_requeues_at_the_home_node(
    pair: tuple[RoostProcess, RoostProcess],  # noqa: F811
) -> None:
    n1, n2 = pair
    with pika.BlockingConnection(pika.URLParameters(n1.url)) as c1:
        ch1 = c1.channel()
        ch1.queue_declare("settle", durable=True)
        ch1.confirm_delivery()
        for i in range(6):
            ch1.basic_publish("", "settle", f"m{i}".encode(), pika.BasicProperties(delivery_mode=2))
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as c2:
            ch2 = c2.channel()
            ch2.basic_qos(prefetch_count=3)  # the client's prefetch holds on the other node
            seen: list[tuple[bytes, bool, int]] = []
            for method, _props, raw in ch2.consume("settle", inactivity_timeout=1):
                if method is None:
                    break
                seen.append((raw, method.redelivered, method.delivery_tag))
                if len(seen) == 3:
                    break
            assert [s[0] for s in seen] == [b"m0", b"m1", b"m2"]
            ch2.basic_ack(seen[0][2])  # m0 gone
            ch2.basic_nack(seen[1][2], requeue=False)  # m1 gone (no dead-letter exchange)
            ch2.basic_nack(seen[2][2], requeue=True)  # m2 back at home, redelivered
            ch2.cancel()
        # what n2's subscription held but never handed out went back too (marked
        # redelivered: the home node sent it once)
        eventually(lambda: ch1.queue_declare("settle", passive=True).method.message_count == 4, 10)
        got = []
        for method, _props, raw in ch1.consume("settle", inactivity_timeout=1):
            if method is None:
                break
            got.append((raw, method.redelivered))
            ch1.basic_ack(method.delivery_tag)
        assert [g[0] for g in got] == [b"m2", b"m3", b"m4", b"m5"]
        assert got[0] == (b"m2", True)
