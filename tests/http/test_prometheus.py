"""Prometheus as RabbitMQ serves it, on --prometheus-port: every series RabbitMQ's own
Grafana dashboards query (docs/metrics/rabbitmq-dashboards.txt) is exported, the text
passes ``promtool check metrics`` (Debian's prometheus package), the global counters
count what real clients did, per protocol, and the latency histograms time publishes
to deliveries and to confirms."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pika
import pytest
import stomp

from tests.http.exposition import series
from tests.support import RoostProcess, eventually, prerequisite

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_SERIES = ROOT / "docs" / "metrics" / "rabbitmq-dashboards.txt"


def names(text: str) -> set[str]:
    return {key.split("{")[0] for key in series(text)}


def scrape(server: RoostProcess, path: str = "/metrics") -> str:
    r = httpx.get(f"http://127.0.0.1:{server.prometheus_port}{path}", timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return r.text


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    """A broker after known traffic: AMQP publishes with confirms into a quorum queue and
    a classic one, an unroutable mandatory one (returned) and a plain one (dropped),
    basic.gets of every kind, a consumer of each ack mode, and STOMP sends."""
    server = RoostProcess(tmp_path_factory.mktemp("prom"), "--latency-sample", "1").start()
    conn = pika.BlockingConnection(pika.URLParameters(server.url))
    ch = conn.channel()
    ch.queue_declare("prom.qq", durable=True, arguments={"x-queue-type": "quorum"})
    ch.queue_declare("prom.cq")
    ch.confirm_delivery()
    for _ in range(10):
        ch.basic_publish("", "prom.qq", b"q" * 500, pika.BasicProperties(delivery_mode=2))
    for _ in range(6):
        ch.basic_publish("", "prom.cq", b"c" * 50)
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish("", "prom.nowhere", b"r", mandatory=True)
    plain = conn.channel()
    plain.basic_publish("", "prom.nowhere", b"d")  # dropped: not mandatory, no confirm
    assert ch.basic_get("prom.cq", auto_ack=True)[0] is not None
    method, _, _ = ch.basic_get("prom.cq")
    ch.basic_ack(method.delivery_tag)
    ch.queue_declare("prom.empty")
    assert ch.basic_get("prom.empty")[0] is None
    got: list[bytes] = []
    ch.basic_consume("prom.cq", lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.basic_consume("prom.qq", lambda c, m, p, b: c.basic_ack(m.delivery_tag))
    deadline = time.monotonic() + 10
    while len(got) < 4 and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    assert len(got) == 4
    conn.process_data_events(0.5)
    s = stomp.Connection12([("127.0.0.1", server.stomp_port)])
    s.connect("guest", "guest", wait=True)
    for _ in range(3):
        s.send("/queue/prom.stomp", "from stomp")
    s.disconnect()
    try:
        yield server
    finally:
        conn.close()
        server.stop()


def test_every_dashboard_series_is_exported(traffic: RoostProcess) -> None:
    wanted = [
        line.split("\t")[0]
        for line in DASHBOARD_SERIES.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert len(wanted) >= 70 and "rabbitmq_raft_commit_latency_seconds" in wanted
    aggregated = names(scrape(traffic))
    missing = [n for n in wanted if n not in aggregated]
    assert not missing, f"not on /metrics: {missing}"
    per_object = names(scrape(traffic, "/metrics/per-object"))
    assert not [n for n in wanted if n not in per_object]
    # the dashboards join every panel on these labels
    identity = [k for k in series(scrape(traffic)) if k.startswith("rabbitmq_identity_info{")]
    assert len(identity) == 1
    for label in ("rabbitmq_node=", "rabbitmq_cluster=", 'rabbitmq_endpoint="default"'):
        assert label in identity[0]


@pytest.mark.parametrize(
    "path",
    [
        "/metrics",
        "/metrics/per-object",
        "/metrics/detailed?" + "&".join(
            f"family={f}"
            for f in (
                "connection_churn_metrics", "node_coarse_metrics", "node_metrics",
                "node_persister_metrics", "ra_metrics", "queue_coarse_metrics",
                "queue_consumer_count", "queue_metrics", "connection_coarse_metrics",
                "channel_metrics", "vhost_status", "exchange_names",
            )
        ),
    ],
)  # fmt: skip
def test_promtool_accepts_the_text(traffic: RoostProcess, path: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        prerequisite("promtool is not installed (Debian's prometheus package)")
    assert promtool is not None
    done = subprocess.run(
        [promtool, "check", "metrics"],
        input=scrape(traffic, path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_global_counters_count_the_traffic(traffic: RoostProcess) -> None:
    m = series(scrape(traffic))
    amqp, stomp_ = '{protocol="amqp091"}', '{protocol="stomp"}'
    g = "rabbitmq_global_messages_"
    assert m[f"{g}received_total{amqp}"] == 18  # 10 + 6 + returned + dropped
    assert m[f"{g}received_confirm_total{amqp}"] == 17
    assert m[f"{g}confirmed_total{amqp}"] == 17
    assert m[f"{g}unroutable_returned_total{amqp}"] == 1
    assert m[f"{g}unroutable_dropped_total{amqp}"] == 1
    assert m[f"{g}routed_total{amqp}"] == 16
    assert m[f"{g}delivered_get_auto_ack_total{amqp}"] == 1
    assert m[f"{g}delivered_get_manual_ack_total{amqp}"] == 1
    assert m[f"{g}get_empty_total{amqp}"] == 1
    assert m[f"{g}delivered_consume_auto_ack_total{amqp}"] == 4
    assert m[f"{g}delivered_consume_manual_ack_total{amqp}"] == 10
    assert m[f"{g}delivered_total{amqp}"] == 16
    assert m[f"{g}received_total{stomp_}"] == 3  # counted after the STOMP client left
    assert m[f"rabbitmq_global_consumers{amqp}"] == 2
    assert m[f"rabbitmq_global_publishers{amqp}"] == 1
    assert m['rabbitmq_global_stream_error_access_refused_total{protocol="stream"}'] == 0
    size = "rabbitmq_message_size_bytes_bucket"
    assert m[f'{size}{{protocol="amqp091",le="100.0"}}'] == 8
    assert m[f'{size}{{protocol="amqp091",le="1000.0"}}'] == 18
    assert m['rabbitmq_message_size_bytes_count{protocol="amqp091"}'] == 18
    # the bodies' bytes: 10 x 500 + 6 x 50 + 1 + 1, and STOMP's 3 x "from stomp"
    assert m['rabbitmq_message_size_bytes_sum{protocol="amqp091"}'] == 5302
    assert m['rabbitmq_message_size_bytes_sum{protocol="stomp"}'] == 30
    assert m["rabbitmq_raft_term_total"] == 1
    assert m["rabbitmq_raft_log_commit_index"] == 20  # 10 enqueued, 10 acked
    per_object = series(scrape(traffic, "/metrics/per-object"))
    assert per_object['rabbitmq_raft_log_last_written_index{vhost="/",queue="prom.qq"}'] == 20


def test_latency_histograms(traffic: RoostProcess) -> None:
    m = series(scrape(traffic))
    confirm, deliver = (
        "roost_message_publish_to_confirm_seconds",
        "roost_message_publish_to_deliver_seconds",
    )
    assert m[f"{confirm}_count"] == 17  # every confirmed publish (--latency-sample 1)
    assert 0 < m[f"{confirm}_sum"] < 17 * 5
    assert m[f'{confirm}_bucket{{le="+Inf"}}'] == 17
    assert m[f'{confirm}_bucket{{le="60.0"}}'] == 17
    # persistent messages into a quorum queue wait for the fsync: not all under 0.1 ms
    assert m[f'{confirm}_bucket{{le="0.0001"}}'] < 17
    # deliveries of messages still in memory: the classic queue's 6 (2 gets, 4 consumed)
    assert m[f"{deliver}_count"] >= 6
    assert m[f"{deliver}_sum"] > 0


def test_latency_off_and_sampled(tmp_path: Path) -> None:
    off = RoostProcess(tmp_path / "off", "--latency-sample", "0").start()
    try:
        assert "roost_message_publish_to_confirm_seconds" not in scrape(off)
    finally:
        off.stop()
    sampled = RoostProcess(tmp_path / "on", "--latency-sample", "4").start()
    try:
        with pika.BlockingConnection(pika.URLParameters(sampled.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("s")
            for _ in range(40):
                ch.basic_publish("", "s", b"x")
        m = series(scrape(sampled))
        assert m["roost_message_publish_to_confirm_seconds_count"] == 10  # one in four
    finally:
        sampled.stop()


def test_detailed_registry_and_unknowns(traffic: RoostProcess) -> None:
    text = scrape(traffic, "/metrics/detailed?family=queue_coarse_metrics&vhost=%2F")
    m = series(text)
    assert m['rabbitmq_detailed_queue_messages_ready{vhost="/",queue="prom.qq"}'] == 0
    assert 'rabbitmq_detailed_queue_messages_ready{vhost="/",queue="prom.stomp"}' in m
    assert "rabbitmq_identity_info" in names(text)  # not renamed, as in RabbitMQ
    assert not any(k.startswith("rabbitmq_detailed_raft") for k in m)  # not asked for
    other = series(scrape(traffic, "/metrics/detailed?family=queue_coarse_metrics&vhost=nope"))
    assert not any(k.startswith("rabbitmq_detailed_queue") for k in other)
    assert names(scrape(traffic, "/metrics/detailed")) == {
        "rabbitmq_identity_info",
        "rabbitmq_build_info",
    }
    base = f"http://127.0.0.1:{traffic.prometheus_port}"
    assert httpx.get(base + "/metrics/detailed?family=bogus").status_code == 400
    assert httpx.get(base + "/metrics/memory-breakdown").status_code == 404
    assert httpx.get(base + "/api/overview").status_code == 404  # metrics only


def test_listener_is_listed(traffic: RoostProcess) -> None:
    overview = httpx.get(traffic.http_url + "/api/overview", auth=("guest", "guest")).json()
    ports = {(li["protocol"], li["port"]) for li in overview["listeners"]}
    assert ("http/prometheus", traffic.prometheus_port) in ports
    eventually(lambda: "Prometheus metrics listening on" in traffic.log)


def test_dead_lettered_and_stream_lag(traffic: RoostProcess) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(traffic.url))
    try:
        ch = conn.channel()
        ch.queue_declare("prom.dlq")
        ch.queue_declare(
            "prom.ttl",
            arguments={"x-message-ttl": 1, "x-dead-letter-exchange": "",
                       "x-dead-letter-routing-key": "prom.dlq"},
        )  # fmt: skip
        dlx = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "prom.dlq"}
        ch.queue_declare("prom.short", arguments={"x-max-length": 1, **dlx})
        for _ in range(3):
            ch.basic_publish("", "prom.ttl", b"t")
            ch.basic_publish("", "prom.short", b"s")
        ch.queue_declare("prom.stream", durable=True, arguments={"x-queue-type": "stream"})
        for i in range(5):
            ch.basic_publish("", "prom.stream", str(i).encode())
        reader = conn.channel()
        reader.basic_qos(prefetch_count=1)
        got: list[bytes] = []
        reader.basic_consume("prom.stream", lambda c, m, p, b: got.append(b),
                             arguments={"x-stream-offset": "first"})  # fmt: skip
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            conn.process_data_events(0.1)

        def dead_lettered() -> dict[str, float]:
            m = series(scrape(traffic))
            labels = '{queue_type="rabbit_classic_queue",dead_letter_strategy="disabled"}'
            expired = m[f"rabbitmq_global_messages_dead_lettered_expired_total{labels}"]
            maxlen = m[f"rabbitmq_global_messages_dead_lettered_maxlen_total{labels}"]
            return {"expired": expired, "maxlen": maxlen} if expired == 3 else {}

        assert eventually(dead_lettered) == {"expired": 3, "maxlen": 2}
        m = series(scrape(traffic, "/metrics/per-object"))
        stream = '{vhost="/",queue="prom.stream"}'
        assert m[f"roost_stream_next_offset{stream}"] == 5
        assert m[f"roost_stream_first_offset{stream}"] == 0
        assert m[f"rabbitmq_stream_consumer_max_offset_lag{stream}"] == 4  # 1 of 5 delivered
        assert series(scrape(traffic))["rabbitmq_stream_consumer_max_offset_lag"] == 4
    finally:
        conn.close()
