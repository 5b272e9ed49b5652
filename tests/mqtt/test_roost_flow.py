"""A QoS 0 publisher that outpaces its consumer is held by TCP back-pressure: Roost stops
reading its socket while the queue it fills is congested (core/flow.py's watermarks, the
session's ReadGate), and the management API shows its connection in state ``flow``."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import httpx
import pika

from roost.mqtt import codec
from roost.mqtt.packets import Connect, Publish
from tests.support import RoostProcess

BODY = b"x" * 1024
HIGH_MESSAGES = 10_000  # core/flow.py: a queue with consumers congests here


def test_fast_publisher_is_held_by_a_slow_consumer(roost: RoostProcess) -> None:
    key = f"flow.{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    sent = [0]
    local_port = [0]
    flow_seen = threading.Event()

    def produce() -> None:
        sock = socket.create_connection(("127.0.0.1", roost.mqtt_port))
        local_port[0] = sock.getsockname()[1]
        sock.sendall(codec.encode(Connect(f"flooder-{key}"), 4))
        sock.recv(4)  # CONNACK
        batch = codec.encode(Publish(key.replace(".", "/"), BODY), 4) * 100
        sock.settimeout(0.2)
        try:
            while not stop.is_set():
                try:
                    sock.sendall(batch)
                except TimeoutError:
                    break  # held: the server stopped reading
                sent[0] += 100
            stop.wait(10)
        finally:
            sock.close()

    def watch() -> None:  # the management API, while the publisher runs
        while not stop.is_set() and not flow_seen.is_set():
            reply = httpx.get(f"{roost.http_url}/api/connections", auth=("guest", "guest"))
            if any(c["peer_port"] == local_port[0] and c["state"] == "flow"
                   for c in reply.json()):
                flow_seen.set()
            stop.wait(0.1)

    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        queue = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_bind(queue, "amq.topic", key)
        ch.basic_qos(prefetch_count=50)
        consumed = [0]

        def on_message(c: object, method: object, _p: object, _b: bytes) -> None:
            consumed[0] += 1
            time.sleep(0.0005)  # a slow consumer that keeps up some progress
            ch.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]

        ch.basic_consume(queue, on_message)
        producer = threading.Thread(target=produce)
        producer.start()
        watcher = threading.Thread(target=watch)
        watcher.start()
        deepest = 0
        deadline = time.monotonic() + 4
        try:
            while time.monotonic() < deadline:
                conn.process_data_events(0.2)
                depth = ch.queue_declare(queue, passive=True).method.message_count
                deepest = max(deepest, depth)
        finally:
            stop.set()
            producer.join()
            watcher.join()
        assert consumed[0] > 0
        # held near the high watermark (plus what was already read), never far beyond
        assert deepest < HIGH_MESSAGES * 2, (deepest, sent[0], consumed[0])
        assert sent[0] > deepest  # the publisher did try to send more than was taken in
        assert flow_seen.is_set(), "the publisher's connection never showed state 'flow'"
