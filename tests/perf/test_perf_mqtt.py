"""``roost perf --protocol mqtt`` (publishers and subscribers made of the codec, and of
paho-mqtt) and PerfTest's variable rates and sizes and consumer latency, against a real
Roost."""

from __future__ import annotations

import re
import uuid

import pika
import pytest

from roost.perf.options import mqtt_routing_key as routing_key
from tests.perf.perf_runs import api, perf
from tests.support import RoostProcess, drain

SENT = re.compile(r"time: (\d+\.\d+)s, sent: (\d+) msg/s")


def mqtt(roost: RoostProcess) -> list[str]:
    return ["--protocol", "mqtt", "--mqtt-url", f"mqtt://127.0.0.1:{roost.mqtt_port}"]


@pytest.mark.parametrize("client", ["codec", "paho"])
def test_mqtt_publishers_and_subscribers_with_confirms(roost: RoostProcess, client: str) -> None:
    topic = f"perf-mqtt-{uuid.uuid4().hex[:6]}"
    report, out = perf(roost, *mqtt(roost), "--mqtt-client", client, "-u", topic, "-x", "2",
                       "-y", "2", "-C", "500", "-c", "50", "-s", "64")
    assert report["protocol"] == "mqtt"
    assert report["published"] == report["confirmed"] == 1000  # QoS 1: every PUBACK
    # each MQTT subscription has a queue of its own: both subscribers get every message
    assert report["consumed"] == 2000
    assert report["latency_us"]["p50"] > 0
    assert any(re.search(r", confirmed: [\d.]+ msg/s, .*consumer latency", line)
               for line in out.splitlines())
    # nothing was set up over AMQP: the subscriptions' queues were the broker's and are gone
    assert not [q for q in api(roost, "/queues") if topic in q["name"]]


def test_mqtt_publishers_read_by_amqp_consumers(roost: RoostProcess) -> None:
    topic = f"perf.mqtt.{uuid.uuid4().hex[:6]}"
    report, _ = perf(roost, *mqtt(roost), "--consumer-protocol", "amqp", "-u", topic,
                     "-x", "1", "-y", "1", "-C", "2000", "-q", "100", "-f", "persistent")
    assert report["published"] == report["consumed"] == 2000
    assert report["latency_us"]["p50"] > 0
    assert topic not in {q["name"] for q in api(roost, "/queues")}  # perf's: deleted


def test_variable_rate_changes_the_measured_rate(roost: RoostProcess) -> None:
    """-vr 100:1 -vr 400:1 over 4 s: the per-second lines alternate 100 and 400."""
    report, out = perf(roost, *mqtt(roost), "-u", f"perf-vr-{uuid.uuid4().hex[:6]}",
                       "-x", "1", "-y", "1", "-z", "4", "-vr", "100:1", "-vr", "400:1")
    rates = [int(m.group(2)) for m in map(SENT.search, out.splitlines()) if m]
    assert len(rates) >= 4, out
    low, high = rates[0::2][:2], rates[1::2][:2]
    # a late line on a loaded box mixes a little of the next step in: still far apart
    assert all(60 <= r <= 180 for r in low), rates
    assert all(280 <= r <= 460 for r in high), rates
    assert 900 <= report["published"] <= 1100  # 2 x (100 + 400)
    assert report["consumed"] == report["published"]


def test_variable_size_changes_the_bodies(roost: RoostProcess) -> None:
    """MQTT publishes with -vs 100:1 -vs 300:1, seen by a queue bound to amq.topic."""
    topic = f"perf.vs.{uuid.uuid4().hex[:6]}"
    copy = f"witness-{uuid.uuid4().hex[:6]}"
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(copy)
        ch.queue_bind(copy, "amq.topic", routing_key(topic))  # perf/vs/… : . and / swap
    perf(roost, *mqtt(roost), "-u", topic, "-x", "1", "-y", "0", "-z", "2", "-r", "200",
         "-vs", "100:1", "-vs", "300:1")
    sizes = [len(body) for _m, _p, body in drain(roost, copy, ack=True)]
    assert set(sizes) == {100, 300}
    first_big = sizes.index(300)
    assert 150 <= first_big <= 250 and set(sizes[first_big:]) == {300}  # after ~1 s


def test_consumer_latency_slows_the_consumer(roost: RoostProcess) -> None:
    """-L 4000 µs per message: a consumer takes at most 250 msg/s of the 600 offered."""
    report, _ = perf(roost, "-u", f"perf.L.{uuid.uuid4().hex[:6]}", "-x", "1", "-y", "1",
                     "-z", "2", "-r", "600", "-L", "4000", "-q", "50")
    assert report["publish_rate"] > 500
    assert report["consume_rate"] < 300  # a read's messages may end past the window
