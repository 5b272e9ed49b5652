"""The traffic job: exact numbers from a known event sequence, a report from a live
broker's events stream (pika traffic), and the streaming (availableNow) ingest."""

from __future__ import annotations

import argparse
import io
import re
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from roost.pipeline import cli as pipeline_cli
from roost.pipeline.amqp import Client, properties
from roost.pipeline.jobs import traffic
from tests.spark.stream_contents import messages
from tests.spark.traffic_events import acked, delivered, published, write_events
from tests.support import RoostProcess, eventually, running

T0 = 1_700_000_000_000.0  # ms, a multiple of 10 s: 10-second windows start on it
A, B = "2023-11-14 22:13:20", "2023-11-14 22:13:30"  # the two windows' starts (UTC)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def job_args(url: str, stream: str, output: Path, *extra: str) -> argparse.Namespace:
    """What ``roost pipeline traffic …`` would pass (the real parser, so defaults match)."""
    parser = argparse.ArgumentParser()
    pipeline_cli.add_arguments(parser)
    return parser.parse_args(
        ["traffic", "--url", url, "--input", stream, "--output", str(output), *extra]
    )


def known_events() -> list[list[dict[str, Any]]]:
    """Window A: queue a gets 10 messages (100 ms apart), each acked 10*(i+1) ms after its
    publish, delivered 5*(i+1) ms after; the first is rejected (requeued) once and
    delivered again. Window B: queue b gets 4 messages (1 s apart), acked 200, 400 and
    600 ms after publish, the fourth taken with auto-ack after 400 ms; one dead-lettered
    from b; one publish to a never acked; one unroutable publish; connections and queues."""
    a, b = [], []
    for i in range(10):
        t = T0 + 100 * i
        a.append(published(t, "k.a", {"a": i + 1}))
        a.append(delivered(t + 5 * (i + 1), "a", i + 1))
        if i == 0:
            a.append({"type": "message.rejected", "ts": t + 6, "queue": "a", "seq": 1,
                      "requeue": True})
            a.append(delivered(t + 7, "a", 1, redelivered=True))
        a.append(acked(t + 10 * (i + 1), "a", i + 1))
    setup = [
        {"type": "connection.created", "ts": T0 - 50, "connection": "app", "user": "guest",
         "protocol": "AMQP 0-9-1", "peer": "127.0.0.1:1"},
        {"type": "queue.created", "ts": T0 - 40, "queue": "a", "kind": "classic"},
        {"type": "queue.created", "ts": T0 - 30, "queue": "b", "kind": "classic"},
    ]
    for i in range(4):
        t = T0 + 10_000 + 1000 * i
        b.append(published(t, "k.b", {"b": i + 1}, size=50))
        if i < 3:
            b.append(delivered(t + 100 * (i + 1), "b", i + 1))
            b.append(acked(t + 200 * (i + 1), "b", i + 1))
        else:
            b.append(delivered(t + 400, "b", i + 1, auto_ack=True))
    b += [
        published(T0 + 15_000, "k.a", {"a": 99}),
        published(T0 + 15_500, "nowhere", {}, size=7),
        {"type": "message.dead_lettered", "ts": T0 + 16_000, "queue": "b", "reason": "expired",
         "exchange": "dlx", "routing_key": "k.b", "routed": 0, "size": 50},
        {"type": "connection.closed", "ts": T0 + 19_000, "connection": "app", "user": "guest",
         "protocol": "AMQP 0-9-1", "reason": "closed", "recv_oct": 5, "send_oct": 6},
    ]
    return [setup, a, b]


@pytest.mark.timeout(300)
def test_known_events_give_exact_numbers(spark: Any, broker: RoostProcess, tmp_path: Path) -> None:
    stream = "traffic.known"
    write_events(broker.url, stream, known_events())
    # an ack of "a" seq 1 from another broker run: counted as an ack, never joined
    write_events(broker.url, stream, [[acked(T0 + 12_000, "a", 1)]], run="2")
    with Client(broker.url) as client:  # something else published to the stream: skipped
        client.confirm_select()
        client.publish("", stream, properties(), b"not events")
        client.flush_confirmed()
    out = tmp_path / "report"
    progress = io.StringIO()
    result = traffic.analyse(
        spark, job_args(broker.url, stream, out, "--window", "10 seconds", "--top", "2"),
        progress,
    )

    s = result["summary"]
    assert s["events"] == 3 + 32 + 15 + 1
    assert s["by_type"] == {
        "connection.created": 1, "connection.closed": 1, "queue.created": 2,
        "message.published": 16, "message.delivered": 15, "message.acked": 14,
        "message.rejected": 1, "message.dead_lettered": 1,
    }
    assert (s["unroutable"], s["bytes_published"]) == (1, 10 * 100 + 4 * 50 + 100 + 7)
    assert (s["first_message_ts"], s["last_message_ts"]) == (T0, T0 + 16_000)

    rates = {(str(r["window_start"])[:19], r["queue"]): r for r in result["rates"]}
    assert set(rates) == {(A, "a"), (B, "a"), (B, "b")}
    counts = ("published", "delivered", "acked", "rejected", "dead_lettered", "bytes_published")
    assert tuple(rates[(A, "a")][c] for c in counts) == (10, 11, 10, 1, 0, 1000)
    assert tuple(rates[(B, "a")][c] for c in counts) == (1, 0, 1, 0, 0, 100)
    assert tuple(rates[(B, "b")][c] for c in counts) == (4, 4, 3, 0, 1, 200)
    per_s = ("publish_rate", "deliver_rate", "ack_rate")
    assert tuple(rates[(A, "a")][c] for c in per_s) == pytest.approx((1.0, 1.1, 1.0))
    assert tuple(rates[(B, "b")][c] for c in per_s) == pytest.approx((0.4, 0.4, 0.3))

    # a: e2e 10..100 ms; b: 200, 400, 600 and the auto-acked 400 (numpy's percentiles)
    lat = {str(r["window_start"])[:19]: r for r in result["latency_all"]}
    keys = ("messages", "e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms", "e2e_max_ms")
    assert tuple(lat[A][k] for k in keys) == pytest.approx((10, 55.0, 95.5, 99.1, 100.0))
    assert tuple(lat[B][k] for k in keys) == pytest.approx((4, 400.0, 570.0, 594.0, 600.0))
    delivery = ("delivery_p50_ms", "delivery_p95_ms", "delivery_p99_ms")
    assert tuple(lat[A][k] for k in delivery) == pytest.approx((27.5, 47.75, 49.55))
    assert tuple(lat[B][k] for k in delivery) == pytest.approx((250.0, 385.0, 397.0))
    overall = result["latency_overall"]
    assert tuple(overall[k] for k in keys) == pytest.approx((14, 75.0, 470.0, 574.0, 600.0))
    by_queue = {r["queue"]: r for r in result["latency_by_queue"]}
    assert tuple(by_queue["b"][k] for k in keys) == pytest.approx((4, 400.0, 570.0, 594.0, 600.0))

    top = [(str(r["window_start"])[:19], r["rank"], r["routing_key"], r["messages"])
           for r in result["top_keys"]]
    assert top == [(A, 1, "k.a", 10), (B, 1, "k.b", 4), (B, 2, "k.a", 1)]
    assert [(r["routing_key"], r["messages"]) for r in result["top_keys_overall"]] == [
        ("k.a", 11), ("k.b", 4)
    ]

    # the same numbers are in the Parquet tables
    stored = spark.read.parquet(str(out / "latency")).where("queue = 'a'").collect()
    assert [(r["messages"], r["e2e_p50_ms"]) for r in stored] == [(10, pytest.approx(55.0))]
    assert spark.read.parquet(str(out / "rates")).count() == 3
    assert spark.read.parquet(str(out / "top_keys")).count() == 3
    assert spark.read.parquet(str(out / "events")).count() == s["events"]

    check_report(out, result)
    lines = progress.getvalue().splitlines()
    steps = [line for line in lines if re.match(r"\[traffic\] step \d/6: ", line)]
    assert [line.split(":")[0] for line in steps] == [
        f"[traffic] step {i}/6" for i in range(1, 7)
    ]
    assert "[traffic]   51 events in" in progress.getvalue()
    assert lines[-1].startswith("[traffic] done: ")


def check_report(out: Path, result: dict[str, Any]) -> None:
    """report.html names PNG charts that exist and are PNG images of a sensible size."""
    page = (out / "report.html").read_text()
    assert "<table class='summary'>" in page
    images = re.findall(r"<img src='([^']+)'", page)
    assert len(images) == len(result["charts"]) >= 4
    for src in images:
        data = (out / src).read_bytes()
        assert data[:8] == PNG_MAGIC
        width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
        assert width >= 600 and height >= 150


@pytest.fixture(scope="module")
def events_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    data = tmp_path_factory.mktemp("traffic-events")
    yield from running(RoostProcess(data, "--events-stream", "roost.events"))


def wait_for_events(server: RoostProcess, until: str, timeout: float = 15.0) -> None:
    """Events are written in batches (within about 0.1 s): wait until ``until`` shows."""
    eventually(
        lambda: any(until.encode() in d.body for d in messages(server.url, "roost.events")),
        timeout,
        f"{until!r} never reached the events stream",
        interval=0.2,
    )


@pytest.mark.timeout(300)
def test_report_from_a_live_broker(spark: Any, events_broker: RoostProcess, tmp_path: Path) -> None:
    params = pika.URLParameters(events_broker.url)
    params.client_properties = {"connection_name": "live-app"}
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.queue_declare("live.q")
        for i in range(20):
            ch.basic_publish("", "live.q", b"x" * 64, pika.BasicProperties(message_id=str(i)))
        for _ in range(20):
            method, _props, _body = ch.basic_get("live.q")
            assert method is not None
            ch.basic_ack(method.delivery_tag)
    wait_for_events(events_broker, '"connection":"live-app"')
    wait_for_events(events_broker, '"type":"connection.closed","ts"')

    out = tmp_path / "live"
    result = traffic.analyse(spark, job_args(events_broker.url, "roost.events", out), io.StringIO())
    by_type = result["summary"]["by_type"]
    assert (by_type["message.published"], by_type["message.acked"]) == (20, 20)
    assert by_type["queue.created"] == 1
    assert sum(r["published"] for r in result["rates"] if r["queue"] == "live.q") == 20
    overall = result["latency_overall"]
    assert overall["messages"] == 20
    assert 0 <= overall["delivery_p50_ms"] <= overall["e2e_p50_ms"]
    assert overall["e2e_p50_ms"] <= overall["e2e_p95_ms"] <= overall["e2e_p99_ms"] < 10_000
    assert [(r["routing_key"], r["messages"]) for r in result["top_keys_overall"]] == [
        ("live.q", 20)
    ]
    check_report(out, result)
    assert "live.q" in (out / "report.html").read_text()


@pytest.mark.timeout(300)
def test_streaming_ingest_reads_each_event_once(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    stream = "traffic.incremental"
    first = [[published(T0 + i, "k", {"q": i + 1}), acked(T0 + i + 5, "q", i + 1)]
             for i in range(3)]
    write_events(broker.url, stream, first)
    out = tmp_path / "inc"
    args = job_args(broker.url, stream, out, "--streaming", "--window", "10 seconds")
    result = traffic.analyse(spark, args, io.StringIO())
    assert result["summary"]["by_type"] == {"message.published": 3, "message.acked": 3}

    more = [[published(T0 + 10 + i, "k", {"q": i + 4}), acked(T0 + 30 + i, "q", i + 4)]
            for i in range(2)]
    write_events(broker.url, stream, more)
    result = traffic.analyse(spark, args, io.StringIO())
    assert result["summary"]["by_type"] == {"message.published": 5, "message.acked": 5}
    assert spark.read.parquet(str(out / "events")).count() == 10  # nothing read twice
    assert result["latency_overall"]["messages"] == 5
    assert result["latency_overall"]["e2e_max_ms"] == pytest.approx(20.0)
    assert (out / "checkpoint").is_dir()


def _now_ms() -> float:
    return time.time() * 1000


def _wait_past(ms: float) -> None:
    """Until the wall clock (which the broker's append times follow) is past ``ms``."""
    while _now_ms() <= ms:
        time.sleep(0.002)


@pytest.mark.timeout(300)
def test_a_time_range_reads_only_the_messages_holding_it(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    """Batches written as the broker writes them (each event before its append time),
    with a late one: appended after --until, yet starting with an event before it."""
    stream = "traffic.timed"
    write_events(broker.url, stream, [[published(_now_ms(), "k.before", {"q": 1}),
                                      acked(_now_ms(), "q", 1)]])  # offset 0
    since = _now_ms() + 2
    _wait_past(since + 2)  # offset 0 was appended a few ms before ``since``
    write_events(broker.url, stream, [
        [published(_now_ms(), "k.in", {"q": 2}), delivered(_now_ms(), "q", 2)],  # 1
        [acked(_now_ms(), "q", 2)],  # 2
    ])
    until = _now_ms() + 3
    _wait_past(until + 2)
    write_events(broker.url, stream, [
        [published(until - 1, "k.late", {"q": 3}), acked(_now_ms(), "q", 3)],  # 3: late
        [published(_now_ms(), "k.after", {"q": 4}), acked(_now_ms(), "q", 4)],  # 4
        [published(_now_ms(), "k.after", {"q": 5})],  # 5
    ])
    out = tmp_path / "timed"
    progress = io.StringIO()
    args = job_args(broker.url, stream, out, "--since", repr(since), "--until", repr(until))
    result = traffic.analyse(spark, args, progress)

    # read: offsets 1 to 3, and the late batch 3 (its first event is before --until);
    # batch 4 starts after --until: there the read stops
    text = progress.getvalue()
    assert "offsets 1 to 4, 3 messages" in text, text
    assert "[traffic]   4 events in the time range, of 5 read, in " in text, text
    assert spark.read.parquet(str(out / "events")).count() == 5
    # the outputs are those of the events in the range, as a filter over everything gives
    assert result["summary"]["by_type"] == {
        "message.published": 2, "message.delivered": 1, "message.acked": 1
    }
    assert [(r["routing_key"], r["messages"]) for r in result["top_keys_overall"]] == [
        ("k.in", 1), ("k.late", 1)
    ]
    assert result["latency_overall"]["messages"] == 1  # q 2: published, delivered, acked


def test_a_missing_events_stream_is_a_clear_error(
    spark: Any, broker: RoostProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = traffic.run(spark, job_args(broker.url, "no.such.events", tmp_path / "x"))
    assert code == 2
    err = capsys.readouterr().err
    assert "no stream 'no.such.events' in vhost '/'" in err
    assert "--events-stream no.such.events" in err
