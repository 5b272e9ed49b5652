"""/metrics (aggregated) and /metrics/per-object in Prometheus text; StatsD push."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pika
import pytest

from tests.http.exposition import parse
from tests.support import RoostProcess, eventually


def test_aggregated(mgmt: RoostProcess, amqp: pika.BlockingConnection, name: str) -> None:
    ch = amqp.channel()
    ch.queue_declare(name)
    for _ in range(3):
        ch.basic_publish("", name, b"abc")
    amqp.process_data_events(0)

    def scraped() -> dict[str, float] | None:
        # the publishes travel on the AMQP connection, the scrape on another: wait until
        # the broker has taken all three (a loaded box can answer the scrape first)
        r = httpx.get(f"{mgmt.http_url}/metrics")
        assert r.headers["content-type"].startswith("text/plain")
        m = parse(r.text)
        return m if m["rabbitmq_queue_messages_ready"] >= 3 else None

    m = eventually(scraped, timeout=10, what="three messages ready in /metrics")
    assert m["rabbitmq_connections"] >= 1 and m["rabbitmq_channels"] >= 1
    assert m['rabbitmq_global_messages_received_total{protocol="amqp091"}'] >= 3
    assert m["rabbitmq_connection_incoming_bytes_total"] > 0
    assert m["rabbitmq_process_resident_memory_bytes"] > 0
    assert not any("queue=" in k for k in m)  # aggregated: no per-object series


def test_per_object(mgmt: RoostProcess, amqp: pika.BlockingConnection, name: str) -> None:
    ch = amqp.channel()
    ch.queue_declare(name)
    ch.basic_publish("", name, b"abc")
    amqp.process_data_events(0)
    labels = f'{{vhost="/",queue="{name}"}}'

    def scraped() -> dict[str, float] | None:
        m = parse(httpx.get(f"{mgmt.http_url}/metrics/per-object").text)
        return m if m.get(f"rabbitmq_queue_messages_ready{labels}") else None

    m = eventually(scraped, timeout=10, what="the message ready in /metrics/per-object")
    assert m[f"rabbitmq_queue_messages_ready{labels}"] == 1
    assert m[f"rabbitmq_queue_messages_published_total{labels}"] == 1
    assert any(k.startswith("rabbitmq_connection_incoming_bytes_total{connection=") for k in m)


@pytest.fixture
def statsd_server(tmp_path) -> Iterator[tuple[RoostProcess, socket.socket]]:  # type: ignore[no-untyped-def]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(10)
    port = sock.getsockname()[1]
    server = RoostProcess(
        tmp_path / "data", "--stats-interval", "0.2", "--statsd", f"127.0.0.1:{port}"
    ).start()
    yield server, sock
    server.stop()
    sock.close()
    assert "Traceback" not in server.log


def test_statsd_push(statsd_server: tuple[RoostProcess, socket.socket]) -> None:
    server, sock = statsd_server
    conn = pika.BlockingConnection(pika.URLParameters(server.url))
    ch = conn.channel()
    ch.queue_declare("stats.q")
    for _ in range(4):
        ch.basic_publish("", "stats.q", b"x")
    conn.process_data_events(0)
    seen: list[str] = []

    def got_queue_gauge() -> bool:
        seen.extend(sock.recv(65536).decode().splitlines())
        return "roost.queue._.stats_q.messages_ready:4|g" in seen

    eventually(got_queue_gauge, timeout=10, interval=0)
    assert any(line.startswith("roost.connections:1|g") for line in seen)
    assert any(line.startswith("roost.published:") and line.endswith("|c") for line in seen)
    conn.close()
