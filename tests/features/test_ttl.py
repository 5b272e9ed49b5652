"""Message TTL (x-message-ttl, the expiration property) and queue expiry (x-expires),
with pika, as RabbitMQ 3.10 behaves: expiry happens at the head of the queue."""

from __future__ import annotations

import time

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.features.conftest import count, dead_letter_queue, drain, wait_get
from tests.support import RoostProcess


def test_queue_ttl_dead_letters_expired(ch: BlockingChannel, qname: str) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(
        qname,
        arguments={
            "x-message-ttl": 50,
            "x-dead-letter-exchange": dlq,
            "x-dead-letter-routing-key": "rk",
        },
    )
    ch.basic_publish("", qname, b"own", pika.BasicProperties(expiration="20"))
    ch.basic_publish("", qname, b"queue's")
    first = wait_get(ch, dlq)
    second = wait_get(ch, dlq)
    assert [first[2], second[2]] == [b"own", b"queue's"]
    assert first[0].routing_key == "rk"
    deaths = [got[1].headers["x-death"][0] for got in (first, second)]
    assert [(d["reason"], d["queue"]) for d in deaths] == [("expired", qname)] * 2
    assert deaths[0]["original-expiration"] == "20"
    assert "original-expiration" not in deaths[1]
    assert first[1].expiration is None
    assert count(ch, qname) == 0


def test_expired_message_is_never_delivered(ch: BlockingChannel, qname: str) -> None:
    """A consumer busy with one message: the next expires meanwhile and is skipped."""
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": dlq})
    ch.basic_qos(prefetch_count=1)
    got: list[bytes] = []
    ch.basic_consume(qname, lambda c, m, p, b: got.append(b))
    ch.basic_publish("", qname, b"first")
    ch.basic_publish("", qname, b"second", pika.BasicProperties(expiration="100"))
    _, props, body = wait_get(ch, dlq)  # the head timer dead-letters it at 100 ms
    assert got == [b"first"]  # second waited behind the unacknowledged first
    assert body == b"second" and props.headers["x-death"][0]["reason"] == "expired"
    ch.basic_publish("", qname, b"third")
    ch.basic_ack(1)
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        ch.connection.process_data_events(time_limit=0.02)
    assert got == [b"first", b"third"]


def test_long_ttl_at_the_head_holds_back_shorter(ch: BlockingChannel, qname: str) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": dlq})
    ch.basic_publish("", qname, b"long", pika.BasicProperties(expiration="1500"))
    ch.basic_publish("", qname, b"short", pika.BasicProperties(expiration="30"))
    ch.connection.process_data_events(time_limit=0.2)
    assert count(ch, dlq) == 0 and count(ch, qname) == 2  # short expired, still queued
    assert [wait_get(ch, dlq)[2], wait_get(ch, dlq)[2]] == [b"long", b"short"]


def test_taking_the_head_drops_expired_behind_it(ch: BlockingChannel, qname: str) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": dlq})
    ch.basic_publish("", qname, b"long", pika.BasicProperties(expiration="60000"))
    ch.basic_publish("", qname, b"short", pika.BasicProperties(expiration="20"))
    ch.connection.process_data_events(time_limit=0.1)
    method, _, body = ch.basic_get(qname, auto_ack=True)
    assert body == b"long" and method.message_count == 0  # as RabbitMQ reports it
    assert wait_get(ch, dlq)[2] == b"short"


def test_zero_ttl_delivers_only_to_a_waiting_consumer(ch: BlockingChannel, qname: str) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-message-ttl": 0, "x-dead-letter-exchange": dlq})
    ch.basic_publish("", qname, b"nobody waits")
    assert wait_get(ch, dlq)[2] == b"nobody waits"
    got: list[bytes] = []
    ch.basic_consume(qname, lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.basic_publish("", qname, b"taken")
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        ch.connection.process_data_events(time_limit=0.02)
    assert got == [b"taken"] and count(ch, dlq) == 0


def test_expired_without_dead_letter_exchange_is_dropped(ch: BlockingChannel, qname: str) -> None:
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"gone", pika.BasicProperties(expiration="10"))
    ch.basic_publish("", qname, b"kept")
    ch.connection.process_data_events(time_limit=0.1)
    assert drain(ch, qname) == [b"kept"]


@pytest.mark.parametrize(
    ("expiration", "reason"),
    [("abc", "no_integer"), ("-1", "{value_negative,-1}"), ("1.5", '{leftover_string,".5"}')],
)
def test_bad_expiration_closes_the_channel(
    conn: pika.BlockingConnection, qname: str, expiration: str, reason: str
) -> None:
    ch = conn.channel()
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"x", pika.BasicProperties(expiration=expiration))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
        ch.queue_declare(qname, passive=True)
    assert err.value.reply_code == 406
    assert err.value.reply_text == (
        f"PRECONDITION_FAILED - invalid expiration '{expiration}': {reason}"
    )


def test_ttl_argument_errors(conn: pika.BlockingConnection, qname: str) -> None:
    for args, why in (
        ({"x-message-ttl": -1}, "{value_negative,-1}"),
        ({"x-message-ttl": "10"}, '"expected integer, got longstr"'),
        ({"x-expires": 0}, "{value_zero,0}"),
    ):
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            ch.queue_declare(qname, arguments=args)
        (key,) = args
        assert err.value.reply_text == (
            f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{qname}' in vhost '/': {why}"
        )


def test_unused_queue_expires(ch: BlockingChannel, http: httpx.Client, qname: str) -> None:
    """Publishing does not count as use; the management API looks without renewing."""
    started = time.monotonic()
    ch.queue_declare(qname, arguments={"x-expires": 300})
    ch.basic_publish("", qname, b"publishing is not use")
    while http.get(f"/api/queues/%2F/{qname}").status_code == 200:
        assert time.monotonic() - started < 5, "queue never expired"
        time.sleep(0.05)
    assert time.monotonic() - started >= 0.3


def test_consumer_and_redeclare_keep_a_queue(
    ch: BlockingChannel, http: httpx.Client, qname: str
) -> None:
    """A queued marker shows the queue was never deleted and declared anew."""
    url = f"/api/queues/%2F/{qname}"
    ch.queue_declare(qname, arguments={"x-expires": 1000})
    ch.basic_publish("", qname, b"marker")
    for _ in range(4):  # redeclared every 300 ms: 1.2 s, past one lease
        ch.connection.process_data_events(time_limit=0.3)
        ch.queue_declare(qname, arguments={"x-expires": 1000})
    assert http.get(url).json()["messages"] == 1
    tag = ch.basic_consume(qname, lambda c, m, p, b: c.basic_ack(m.delivery_tag))
    ch.connection.process_data_events(time_limit=1.2)  # consumed from, past one lease
    assert http.get(url).status_code == 200
    ch.basic_cancel(tag)  # the lease starts again
    started = time.monotonic()
    while http.get(url).status_code == 200:
        assert time.monotonic() - started < 5, "queue never expired"
        time.sleep(0.05)
    assert time.monotonic() - started >= 0.9


def test_ttl_applies_to_recovered_messages(fresh_roost: RoostProcess) -> None:
    """After a restart a durable queue's TTL still runs."""
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.exchange_declare("dlx", "fanout", durable=True)
    ch.queue_declare("dlq", durable=True)
    ch.queue_bind("dlq", "dlx")
    ch.queue_declare("src", durable=True, arguments={"x-dead-letter-exchange": "dlx"})
    ch.confirm_delivery()
    ch.basic_publish("", "src", b"q", pika.BasicProperties(delivery_mode=2, expiration="400"))
    conn.close()
    fresh_roost.stop()
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    _, props, body = wait_get(ch, "dlq")
    assert body == b"q" and props.headers["x-death"][0]["reason"] == "expired"
    assert count(ch, "src") == 0
    conn.close()


def test_recovered_messages_keep_their_original_deadline(fresh_roost: RoostProcess) -> None:
    """The store keeps each message's absolute expiry (as RabbitMQ does): a message whose
    TTL ran out while the broker was down is dead-lettered right after the restart and
    never delivered, instead of living another full TTL; one still in time is kept."""
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.exchange_declare("dlx", "fanout", durable=True)
    ch.queue_declare("dlq", durable=True)
    ch.queue_bind("dlq", "dlx")
    ch.queue_declare("by-queue", durable=True,
                     arguments={"x-dead-letter-exchange": "dlx", "x-message-ttl": 2000})
    ch.queue_declare("by-message", durable=True, arguments={"x-dead-letter-exchange": "dlx"})
    ch.confirm_delivery()
    persistent = pika.BasicProperties(delivery_mode=2)
    ch.basic_publish("", "by-queue", b"queue ttl", persistent)
    ch.basic_publish("", "by-message", b"own ttl",
                     pika.BasicProperties(delivery_mode=2, expiration="2000"))
    published = time.monotonic()
    conn.close()
    fresh_roost.stop()
    time.sleep(max(0.0, published + 2.2 - time.monotonic()))  # the TTLs run out while down
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    # counted from the recovery, both would still be deliverable for almost 2 s
    assert ch.basic_get("by-queue", auto_ack=True)[0] is None
    assert ch.basic_get("by-message", auto_ack=True)[0] is None
    dead = sorted(wait_get(ch, "dlq")[2] for _ in range(2))
    assert dead == [b"own ttl", b"queue ttl"]
    # a message stored with time left still expires on its original schedule
    ch.confirm_delivery()
    ch.basic_publish("", "by-message", b"later",
                     pika.BasicProperties(delivery_mode=2, expiration="60000"))
    conn.close()
    fresh_roost.stop()
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    assert drain(ch, "by-message") == [b"later"]
    conn.close()


def test_an_unused_queue_still_expires_after_a_restart(fresh_roost: RoostProcess) -> None:
    """x-expires on a durable queue: recovered, its period runs from the recovery (as in
    RabbitMQ); once expired it stays gone across the next restart."""
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    conn.channel().queue_declare("lease", durable=True, arguments={"x-expires": 1500})
    conn.close()
    fresh_roost.stop()
    fresh_roost.start()
    url = f"{fresh_roost.http_url}/api/queues/%2F/lease"
    auth = ("guest", "guest")
    assert httpx.get(url, auth=auth).status_code == 200  # recovered, not expired at start
    started = time.monotonic()
    while httpx.get(url, auth=auth).status_code == 200:
        assert time.monotonic() - started < 10, "the recovered queue never expired"
        time.sleep(0.05)  # polled over HTTP: nothing to await
    fresh_roost.stop()
    fresh_roost.start()  # on new ports
    url = f"{fresh_roost.http_url}/api/queues/%2F/lease"
    assert httpx.get(url, auth=auth).status_code == 404
