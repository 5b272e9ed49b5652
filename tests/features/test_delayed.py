"""``x-delayed-message`` exchanges (the rabbitmq-delayed-message-exchange plugin's type):
``x-delayed-type``, the ``x-delay`` header, and held messages surviving a restart."""

from __future__ import annotations

import decimal
import time
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest
import stomp
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

from tests.features.conftest import Returns, drain, pika_params, pump, settle
from tests.support import RoostProcess

DELAYED = {"x-delayed-type": "direct"}
PERSISTENT = 2


def _delay(ms: Any, **headers: Any) -> pika.BasicProperties:
    return pika.BasicProperties(headers={"x-delay": ms, **headers})


def _consume(ch: BlockingChannel, queue: str) -> list[tuple[float, Any, bytes]]:
    """(arrival time, properties, body) of every delivery from now on."""
    got: list[tuple[float, Any, bytes]] = []
    ch.basic_consume(
        queue, lambda _c, _m, props, body: got.append((time.monotonic(), props, body)), True
    )
    return got


def _delayed_queue(ch: BlockingChannel, name: str, kind: str = "direct", key: str = "k") -> str:
    ch.exchange_declare(name, "x-delayed-message", arguments={"x-delayed-type": kind})
    ch.queue_declare(f"{name}.q")
    ch.queue_bind(f"{name}.q", name, key)
    return f"{name}.q"


def test_a_message_waits_for_its_delay(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    queue = _delayed_queue(ch, name)
    got = _consume(ch, queue)
    sent = time.monotonic()
    ch.basic_publish(name, "k", b"later", _delay(300, other="kept"))
    ch.basic_publish(name, "k", b"now")
    assert pump(conn, lambda: len(got) == 2)
    (t_now, _p, first), (t_later, props, second) = got
    assert (first, second) == (b"now", b"later")
    assert t_now - sent < 0.25 <= 0.29 <= t_later - sent
    assert props.headers == {"x-delay": -300, "other": "kept"}  # the plugin's "was delayed"


def test_messages_leave_in_due_order(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    queue = _delayed_queue(ch, name)
    got = _consume(ch, queue)
    for ms in (450, 150, 300):
        ch.basic_publish(name, "k", str(ms).encode(), _delay(ms))
    assert pump(conn, lambda: len(got) == 3)
    assert [body for _t, _p, body in got] == [b"150", b"300", b"450"]


@pytest.mark.parametrize("value", [0, -5, "soon", True])
def test_no_positive_delay_routes_at_once(ch: BlockingChannel, name: str, value: Any) -> None:
    queue = _delayed_queue(ch, name)
    ch.basic_publish(name, "k", b"x", _delay(value))
    _m, props, body = ch.basic_get(queue, auto_ack=True)
    assert body == b"x" and props.headers == {"x-delay": value}  # untouched


def test_the_delayed_type_routes(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    queue = _delayed_queue(ch, name, "topic", "orders.*")
    got = _consume(ch, queue)
    returns = Returns(ch)
    ch.basic_publish(name, "orders.new", b"match", _delay("100"), mandatory=True)
    ch.basic_publish(name, "other.new", b"no match", _delay(decimal.Decimal("100.5")))
    assert pump(conn, lambda: len(got) == 1)
    settle(conn, 0.3)
    assert [body for _t, _p, body in got] == [b"match"]
    assert returns.items == []  # held messages are not returned (the plugin returns them)


def test_a_delayed_exchange_as_dead_letter_exchange_delays_the_dead_letter(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    """Retry with back-off: a rejected message that carries ``x-delay`` is held by the
    x-delayed-message exchange its queue dead-letters to, then routed (RabbitMQ's
    dead-lettering goes through the exchange type, so the plugin delays it there too)."""
    retry = _delayed_queue(ch, f"{name}.retry", key="work")
    ch.queue_declare(
        f"{name}.work",
        arguments={"x-dead-letter-exchange": f"{name}.retry", "x-dead-letter-routing-key": "work"},
    )
    ch.basic_publish("", f"{name}.work", b"try again", _delay(300))
    method, _props, _body = ch.basic_get(f"{name}.work")
    got = _consume(ch, retry)
    rejected = time.monotonic()
    ch.basic_reject(method.delivery_tag, requeue=False)
    assert pump(conn, lambda: len(got) == 1)
    ((arrived, props, body),) = got
    assert body == b"try again" and arrived - rejected >= 0.29
    assert props.headers["x-death"][0]["reason"] == "rejected"


def test_declare_checks_the_delayed_type(conn: pika.BlockingConnection, name: str) -> None:
    for args in ({}, {"x-delayed-type": "nope"}, {"x-delayed-type": "x-delayed-message"}):
        with pytest.raises(ChannelClosedByBroker) as err:
            conn.channel().exchange_declare(name, "x-delayed-message", arguments=args)
        assert err.value.args == (
            406,
            "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing "
            "exchange type",
        )


def test_management_lists_the_type(ch: BlockingChannel, http: httpx.Client, name: str) -> None:
    ch.exchange_declare(name, "x-delayed-message", arguments=DELAYED)
    ex = http.get(f"/api/exchanges/%2F/{name}").json()
    assert ex["type"] == "x-delayed-message" and ex["arguments"] == DELAYED
    types = {t["name"] for t in http.get("/api/overview").json()["exchange_types"]}
    assert {"x-delayed-message", "x-consistent-hash", "x-message-deduplication"} <= types


def test_deleting_the_exchange_drops_what_it_holds(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    queue = _delayed_queue(ch, name)
    ch.basic_publish(name, "k", b"never", _delay(150))
    ch.exchange_delete(name)
    ch.exchange_declare(name, "x-delayed-message", arguments=DELAYED)
    ch.queue_bind(queue, name, "k")
    settle(conn, 0.4)
    assert drain(ch, queue) == []


def test_stomp_send_with_x_delay(roost: RoostProcess, ch: BlockingChannel, name: str) -> None:
    queue = _delayed_queue(ch, name)
    stomp_conn = stomp.Connection12([("127.0.0.1", roost.stomp_port)])
    stomp_conn.connect("guest", "guest", wait=True)
    try:
        sent = time.monotonic()
        stomp_conn.send(f"/exchange/{name}/k", "from stomp", headers={"x-delay": "200"})
    finally:
        stomp_conn.disconnect()
    got = _consume(ch, queue)
    assert pump(ch.connection, lambda: len(got) == 1)
    assert got[0][2] == b"from stomp" and got[0][0] - sent >= 0.15


def test_durable_delayed_messages_survive_a_crash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = RoostProcess(data).start()
    try:
        conn = pika.BlockingConnection(pika_params(server))
        ch = conn.channel()
        ch.exchange_declare("dx", "x-delayed-message", durable=True, arguments=DELAYED)
        ch.queue_declare("dq", durable=True)
        ch.queue_bind("dq", "dx", "k")
        ch.confirm_delivery()

        def persistent(ms: int) -> pika.BasicProperties:
            return pika.BasicProperties(headers={"x-delay": ms}, delivery_mode=PERSISTENT)

        ch.basic_publish("dx", "k", b"transient, lost", _delay(300), mandatory=True)
        published = time.monotonic()
        ch.basic_publish("dx", "k", b"later", persistent(2000))
        ch.basic_publish("dx", "k", b"sooner", persistent(300))
        conn.close()
        server.kill()  # the confirms came after the fsync: nothing else is needed
        server = RoostProcess(data).start()
        conn = pika.BlockingConnection(pika_params(server))
        ch = conn.channel()
        got = _consume(ch, "dq")
        assert pump(conn, lambda: len(got) == 2, timeout=10)
        assert [body for _t, _p, body in got] == [b"sooner", b"later"]
        assert got[1][0] - published >= 1.9  # not before it was due
        assert got[0][1].headers == {"x-delay": -300}
        assert got[0][1].delivery_mode == PERSISTENT
        settle(conn, 0.3)
        assert len(got) == 2
        conn.close()
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log
