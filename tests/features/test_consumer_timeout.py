"""Consumer ack timeout (--consumer-timeout-ms) and per-message ack deadlines
(x-ack-timeout), with pika and stomp.py against a real server.

The 406 text and the requeue were recorded from RabbitMQ 3.10.8 (consumer_timeout = 2000,
channel_tick_interval lowered so the check runs often); basic.get deliveries count too.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pika
import pytest
import stomp

from roost.config_sources import load
from roost.core.errors import BrokerError
from roost.core.message import Message, Properties
from tests.brokers import memory_broker
from tests.features.consumers_support import Recorder, connect
from tests.stomp.conftest import Inbox
from tests.support import RoostProcess, pump, settle

TIMEOUT_MS = 1000  # long enough for a loaded machine to ack in time where it must
TEXT = (
    "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value "
    f"used: {TIMEOUT_MS} ms. This timeout value can be configured, see consumers doc guide "
    "to learn more"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    roost = RoostProcess(
        tmp_path_factory.mktemp("roost-timeout"), "--consumer-timeout-ms", str(TIMEOUT_MS)
    ).start()
    yield roost
    assert roost.stop() == 0
    assert "Traceback" not in roost.log, roost.log


def watch_close(ch: Any) -> list[Any]:
    """The reason the broker gives when it closes ``ch`` (filled in by pika's events)."""
    reasons: list[Any] = []
    ch._impl.add_on_close_callback(lambda _ch, reason: reasons.append(reason))
    return reasons


def test_unacked_delivery_closes_the_channel_406_and_requeues(server: RoostProcess,
                                                              qname: str) -> None:
    conn = connect(server)
    ch = conn.channel()
    ch.queue_declare(qname)
    for i in range(3):
        ch.basic_publish("", qname, str(i).encode())
    reasons = watch_close(ch)
    ch.basic_qos(prefetch_count=2)
    rec = Recorder()
    start = time.monotonic()
    ch.basic_consume(qname, rec.callback("c"))
    assert pump(conn, lambda: bool(reasons), timeout=5)
    assert time.monotonic() - start >= TIMEOUT_MS / 1000
    assert reasons[0].reply_code == 406 and reasons[0].reply_text == TEXT
    assert rec.total() == 2
    other = conn.channel()  # the connection lives on
    assert other.queue_declare(qname, passive=True).method.message_count == 3
    method, _props, body = other.basic_get(qname, auto_ack=True)
    assert (body, method.redelivered) == (b"0", True)
    conn.close()


def test_basic_get_deliveries_count_too(server: RoostProcess, qname: str) -> None:
    conn = connect(server)
    ch = conn.channel()
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"x")
    reasons = watch_close(ch)
    assert ch.basic_get(qname, auto_ack=False)[2] == b"x"
    assert pump(conn, lambda: bool(reasons), timeout=5)
    assert reasons[0].reply_code == 406
    assert conn.channel().queue_declare(qname, passive=True).method.message_count == 1
    conn.close()


def test_acks_in_time_keep_the_channel_open(server: RoostProcess, qname: str) -> None:
    """Each delivery is acked well within the timeout, over twice the timeout in all."""
    conn = connect(server)
    ch = conn.channel()
    ch.queue_declare(qname)
    reasons = watch_close(ch)
    ch.basic_qos(prefetch_count=1)
    rec = Recorder()
    ch.basic_consume(qname, rec.callback("c"))
    for i in range(4):
        ch.basic_publish("", qname, str(i).encode())
    for i in range(4):
        assert pump(conn, lambda i=i: rec.total() == i + 1)  # type: ignore[misc]
        settle(conn, TIMEOUT_MS / 1000 * 0.3)
        ch.basic_ack(rec.got["c"][i][2])
    settle(conn, 0.2)
    assert not reasons and ch.is_open
    conn.close()


def test_no_ack_consumers_never_time_out(server: RoostProcess, qname: str) -> None:
    conn = connect(server)
    ch = conn.channel()
    ch.queue_declare(qname)
    reasons = watch_close(ch)
    rec = Recorder()
    ch.basic_consume(qname, rec.callback("c"), auto_ack=True)
    ch.basic_publish("", qname, b"x")
    assert pump(conn, lambda: rec.total() == 1)
    settle(conn, TIMEOUT_MS / 1000 * 1.5)
    assert not reasons and ch.is_open
    conn.close()


def test_x_ack_timeout_requeues_to_another_consumer_and_the_late_ack_is_ignored(
    server: RoostProcess, qname: str
) -> None:
    """The holder keeps its channel; its late ack only frees its prefetch slot."""
    conn = connect(server)
    slow = conn.channel()
    slow.queue_declare(qname)
    reasons = watch_close(slow)
    slow.basic_qos(prefetch_count=1)
    rec = Recorder()
    slow.basic_consume(qname, rec.callback("slow"))
    job = pika.BasicProperties(headers={"x-ack-timeout": Decimal("0.2")})
    slow.basic_publish("", qname, b"job", job)
    assert pump(conn, lambda: rec.total() == 1)
    fast = conn.channel()
    fast.basic_consume(qname, rec.callback("fast"), auto_ack=True, consumer_tag="fast")
    start = time.monotonic()
    assert pump(conn, lambda: "fast" in rec.got)
    assert rec.got["fast"] == [("job", True, 1)]
    assert time.monotonic() - start < 2
    # past the consumer timeout too: the requeued delivery no longer counts against it
    settle(conn, TIMEOUT_MS / 1000 * 1.5)
    assert not reasons
    fast.basic_cancel("fast")
    slow.basic_ack(rec.got["slow"][0][2])  # late: ignored, no 406 for an unknown tag
    slow.basic_publish("", qname, b"next")  # the slot it held is free again
    assert pump(conn, lambda: len(rec.bodies("slow")) == 2), (reasons, rec.got)
    assert rec.bodies("slow") == ["job", "next"]
    slow.basic_ack(rec.got["slow"][1][2])
    assert slow.queue_declare(qname, passive=True).method.message_count == 0
    assert not reasons and slow.is_open
    conn.close()


def test_a_longer_x_ack_timeout_outlives_the_consumer_timeout(server: RoostProcess,
                                                             qname: str) -> None:
    """A long task asks for a longer deadline than the channel's consumer timeout."""
    conn = connect(server)
    ch = conn.channel()
    ch.queue_declare(qname)
    reasons = watch_close(ch)
    ch.basic_publish("", qname, b"long", pika.BasicProperties(headers={"x-ack-timeout": 30}))
    rec = Recorder()
    ch.basic_consume(qname, rec.callback("c"))
    assert pump(conn, lambda: rec.total() == 1)
    settle(conn, TIMEOUT_MS / 1000 * 1.6)
    assert not reasons and rec.total() == 1
    ch.basic_ack(rec.got["c"][0][2])
    assert ch.queue_declare(qname, passive=True).method.message_count == 0
    assert not reasons and ch.is_open
    conn.close()


def test_stomp_connection_holding_a_message_too_long_gets_an_error(
    server: RoostProcess, qname: str
) -> None:
    client = stomp.Connection12([("127.0.0.1", server.stomp_port)], heartbeats=(0, 0))
    inbox = Inbox()
    client.set_listener("inbox", inbox)
    client.connect("guest", "guest", wait=True)
    client.subscribe(f"/queue/{qname}", id="s", ack="client-individual", receipt="r")
    assert inbox.receipt() == "r"
    client.send(f"/queue/{qname}", "held")
    assert inbox.message().body == "held"
    error = inbox.errors.get(timeout=5)
    assert error.headers["message"] == "delivery acknowledgement timed out"
    assert f"timed out. Timeout value used: {TIMEOUT_MS} ms" in error.body
    conn = connect(server)
    method, _props, body = conn.channel().basic_get(qname, auto_ack=True)
    assert (body, method.redelivered) == (b"held", True)
    conn.close()


def test_stomp_subscription_ack_timeout_is_the_default_deadline(
    server: RoostProcess, qname: str
) -> None:
    """STOMP's ack-timeout on SUBSCRIBE (ocamlmq) uses the same core deadlines."""
    client = stomp.Connection12([("127.0.0.1", server.stomp_port)], heartbeats=(0, 0))
    inbox = Inbox()
    client.set_listener("inbox", inbox)
    client.connect("guest", "guest", wait=True)
    try:
        client.subscribe(f"/queue/{qname}", id="s", ack="client-individual", receipt="r",
                         headers={"ack-timeout": "0.2", "prefetch-count": "1"})
        assert inbox.receipt() == "r"
        client.send(f"/queue/{qname}", "job")
        first = inbox.message()
        conn = connect(server)
        ch = conn.channel()
        rec = Recorder()
        ch.basic_consume(qname, rec.callback("amqp"), auto_ack=True)
        assert pump(conn, lambda: rec.total() == 1)
        assert rec.got["amqp"][0][:2] == ("job", True)
        client.ack(first.headers["ack"], receipt="late")  # ignored, no ERROR
        assert inbox.receipt() == "late" and inbox.errors.empty()
        conn.close()
    finally:
        client.disconnect()


def test_help_and_config_file_name_the_setting(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "roost", "server", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--consumer-timeout-ms" in out and "1800000" in " ".join(out.split())
    toml = tmp_path / "roost.toml"
    toml.write_text("consumer_timeout_ms = 0\n")
    assert load(argparse.Namespace(config=str(toml)), environ={}).consumer_timeout_ms == 0
    assert load(argparse.Namespace(config=None), environ={}).consumer_timeout_ms == 1_800_000


class Sink:
    def __init__(self) -> None:
        self.errors: list[BrokerError] = []

    def deliver(self, *args: object) -> None: ...

    def consumer_cancelled(self, consumer_tag: str) -> None: ...

    def close_with(self, error: BrokerError) -> None:
        self.errors.append(error)


@pytest.mark.parametrize("timeout_ms", [0, 1000])
def test_the_sweep_is_never_early_and_zero_disables_it(timeout_ms: int) -> None:
    """The sweep's bound, with a clock under the test's control (no server needed)."""
    broker = memory_broker()
    user = broker.authenticate("guest", "guest", peer_host="127.0.0.1")
    client = broker.connect(user, "/", protocol="test", peer="127.0.0.1:1")
    sink = Sink()
    session = broker.open_session(client, sink, number=1)
    timeouts = broker.ack_timeouts
    timeouts.set_timeout(timeout_ms)
    broker.declare_queue(client, "q")
    broker.consume(session, "q", "c", no_ack=False, exclusive=False)
    t = 1000.0
    timeouts.tick(t)
    broker.publish(client, "", Message("", "q", Properties(), b"x"))  # delivered at ~t
    t += 0.001
    while t < 1000.0 + 3:
        timeouts.tick(t)
        if sink.errors:
            break
        t += 0.01
    if timeout_ms == 0:
        assert not sink.errors
    else:
        assert sink.errors and t - 1000.0 >= 1.0
        assert t - 1000.0 <= 1.0 + 2 * timeouts.period + 0.02
