"""The firehose (amq.rabbitmq.trace) as RabbitMQ's: ``roost ctl trace_on`` / ``trace on``
and ``PUT /api/vhosts/V {"tracing": true}`` switch it; publish and deliver copies carry
RabbitMQ's routing keys and headers (the same as RabbitMQ 3.10 gives for the same client
calls, in a side-by-side test); copies are never traced again; off, nothing is copied."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import httpx
import pika
import pytest
import stomp

from bench._brokers import free_port, rabbitmq, rabbitmq_installed
from tests.http.conftest import json_of
from tests.support import RoostProcess

Copy = tuple[str, bytes, dict[str, Any]]


def ctl(url: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "roost", "ctl", "--url", url, *args],
        check=True,
        capture_output=True,
        timeout=60,
    )


def scenario(amqp_url: str) -> list[Copy]:
    """A trace queue bound to everything; an unroutable publish, a routed one with
    properties, a basic.get of it, and a consumed redelivery: the copies, in order."""
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        ch = conn.channel()
        ch.queue_declare("trace.tap", exclusive=True)
        ch.queue_bind("trace.tap", "amq.rabbitmq.trace", "#")
        ch.queue_declare("trace.work", auto_delete=True)
        pub = conn.channel()
        pub.basic_publish("amq.direct", "nowhere", b"lost")
        props = pika.BasicProperties(content_type="text/plain", delivery_mode=2, headers={"a": 1})
        pub.basic_publish("", "trace.work", b"hello", props)
        method = None
        deadline = time.monotonic() + 10
        while method is None and time.monotonic() < deadline:  # channels run apart
            method, _, _ = ch.basic_get("trace.work")
        assert method is not None
        ch.basic_nack(method.delivery_tag, requeue=True)
        got: list[bytes] = []
        ch.basic_consume("trace.work", lambda c, m, p, b: got.append(b), auto_ack=True)
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            conn.process_data_events(0.1)
        ch.basic_cancel(ch.consumer_tags[0])
        copies: list[Copy] = []
        deadline = time.monotonic() + 10
        while len(copies) < 4 and time.monotonic() < deadline:
            m, p, b = ch.basic_get("trace.tap", auto_ack=True)
            if m is None:
                conn.process_data_events(0.05)
                continue
            copies.append((m.routing_key, b, p.headers))
        conn.process_data_events(0.3)
        assert ch.basic_get("trace.tap")[0] is None  # no copy of a copy
        return copies
    finally:
        conn.close()


def normal(copies: list[Copy]) -> list[Copy]:
    """What differs between brokers by name only: the node and the connection name."""
    out = []
    for key, body, headers in copies:
        h = dict(headers)
        assert h.pop("node") and h.pop("connection")
        out.append((key, body, h))
    return out


EXPECTED = [
    ("publish.amq.direct", b"lost", {
        "exchange_name": "amq.direct", "routing_keys": ["nowhere"], "properties": {},
        "vhost": "/", "channel": 2, "user": "guest", "routed_queues": [],
    }),
    ("publish.", b"hello", {
        "exchange_name": "", "routing_keys": ["trace.work"],
        "properties": {"content_type": "text/plain", "delivery_mode": 2, "headers": {"a": 1}},
        "vhost": "/", "channel": 2, "user": "guest", "routed_queues": ["trace.work"],
    }),
    ("deliver.trace.work", b"hello", {
        "exchange_name": "", "routing_keys": ["trace.work"],
        "properties": {"content_type": "text/plain", "delivery_mode": 2, "headers": {"a": 1}},
        "vhost": "/", "channel": 1, "user": "guest", "redelivered": 0,
    }),
    ("deliver.trace.work", b"hello", {
        "exchange_name": "", "routing_keys": ["trace.work"],
        "properties": {"content_type": "text/plain", "delivery_mode": 2, "headers": {"a": 1}},
        "vhost": "/", "channel": 1, "user": "guest", "redelivered": 1,
    }),
]  # fmt: skip


def test_trace_on_off_and_the_copies(mgmt: RoostProcess, http: httpx.Client) -> None:
    ctl(mgmt.http_url, "trace_on")
    try:
        assert json_of(http.get("/api/vhosts/%2F"))["tracing"] is True
        copies = scenario(mgmt.url)
        assert normal(copies) == EXPECTED
        node = json_of(http.get("/api/overview"))["node"]
        assert all(h["node"] == node for _, _, h in copies)
    finally:
        ctl(mgmt.http_url, "trace", "off")
    assert json_of(http.get("/api/vhosts/%2F"))["tracing"] is False
    assert scenario(mgmt.url) == []  # off: nothing copied


def test_stomp_is_traced_and_the_api_switch(
    mgmt: RoostProcess, http: httpx.Client, name: str
) -> None:
    assert http.put(f"/api/vhosts/{name}", json={}).status_code in (201, 204)
    assert http.put(f"/api/vhosts/{name}", json={"tracing": "yes"}).status_code == 400
    assert http.put(f"/api/vhosts/{name}", json={"tracing": True}).status_code == 204
    try:
        params = pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{mgmt.amqp_port}/{name}")
        with pika.BlockingConnection(params) as conn:
            ch = conn.channel()
            ch.queue_declare("tap", exclusive=True)
            ch.queue_bind("tap", "amq.rabbitmq.trace", "publish.#")
            s = stomp.Connection12([("127.0.0.1", mgmt.stomp_port)], vhost=name)
            s.connect("guest", "guest", wait=True)
            s.send("/queue/from-stomp", "over stomp")
            s.disconnect()
            deadline = time.monotonic() + 10
            method = None
            while method is None and time.monotonic() < deadline:
                method, props, body = ch.basic_get("tap", auto_ack=True)
                conn.process_data_events(0.05)
            assert method is not None and body == b"over stomp"
            assert method.routing_key == "publish."
            assert props.headers["routed_queues"] == ["from-stomp"]
            assert props.headers["vhost"] == name and props.headers["user"] == "guest"
    finally:
        http.delete(f"/api/vhosts/{name}")


@pytest.mark.rabbitmq
@pytest.mark.skipif(not rabbitmq_installed(), reason="rabbitmq-server is not installed")
def test_rabbitmq_makes_the_same_copies() -> None:
    port = free_port()
    conf = f"management.tcp.port = {port}\nmanagement.tcp.ip = 127.0.0.1\n"
    with rabbitmq(plugins=("rabbitmq_management",), extra_conf=conf) as url:
        ctl(f"http://127.0.0.1:{port}", "trace_on")
        copies = scenario(url)
    assert normal(copies) == EXPECTED, json.dumps(normal(copies), default=str)
