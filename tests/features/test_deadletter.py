"""Dead-lettering with pika (and one STOMP client), as RabbitMQ 3.10 does it: reasons
rejected and delivery_limit here (expired: test_ttl.py, maxlen: test_maxlen.py)."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pika
import pika.compat
import pytest
import stomp
from pika.adapters.blocking_connection import BlockingChannel

from tests.features.conftest import count, dead_letter_queue, drain, wait_get
from tests.support import RoostProcess


def test_reject_dead_letters_with_rabbitmq_headers(ch: BlockingChannel, qname: str) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": dlq})
    props = pika.BasicProperties(headers={"CC": ["c1"], "app": 1}, expiration="60000")
    ch.basic_publish("", qname, b"body", props)
    method, _, _ = ch.basic_get(qname)
    ch.basic_reject(method.delivery_tag, requeue=False)

    got, p, body = wait_get(ch, dlq)
    assert (got.exchange, got.routing_key, got.redelivered, body) == (dlq, qname, False, b"body")
    assert p.expiration is None  # removed, kept in x-death as original-expiration
    headers = p.headers
    (death,) = headers["x-death"]
    assert isinstance(death.pop("time"), datetime.datetime)  # an AMQP timestamp
    assert isinstance(death["count"], pika.compat.long)  # a 64-bit 'l' field, as RabbitMQ
    assert death == {
        "count": 1,
        "reason": "rejected",
        "queue": qname,
        "exchange": "",
        "routing-keys": [qname, "c1"],
        "original-expiration": "60000",
    }
    assert headers["app"] == 1 and headers["CC"] == ["c1"]
    assert (
        headers["x-first-death-exchange"],
        headers["x-first-death-queue"],
        headers["x-first-death-reason"],
    ) == ("", qname, "rejected")
    assert headers["x-last-death-queue"] == qname
    assert count(ch, qname) == 0


def test_nack_multiple_with_dead_letter_routing_key(ch: BlockingChannel, qname: str) -> None:
    ch.exchange_declare(qname + ".dx", "direct")
    ch.queue_declare(qname + ".dlq")
    ch.queue_bind(qname + ".dlq", qname + ".dx", "dead")
    ch.queue_declare(
        qname,
        arguments={"x-dead-letter-exchange": qname + ".dx", "x-dead-letter-routing-key": "dead"},
    )
    for i in range(3):
        ch.basic_publish("", qname, b"%d" % i, pika.BasicProperties(headers={"CC": ["x"]}))
    tags = [ch.basic_get(qname)[0].delivery_tag for _ in range(3)]
    ch.basic_nack(tags[-1], multiple=True, requeue=False)
    got = [wait_get(ch, qname + ".dlq") for _ in range(3)]
    assert [body for _, _, body in got] == [b"0", b"1", b"2"]
    assert {m.routing_key for m, _, _ in got} == {"dead"}
    assert all("CC" not in p.headers for _, p, _ in got)  # the new key replaces CC routing


def test_requeue_true_does_not_dead_letter(ch: BlockingChannel, qname: str) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": dlq})
    ch.basic_publish("", qname, b"m")
    method, _, _ = ch.basic_get(qname)
    ch.basic_nack(method.delivery_tag, requeue=True)
    again, _, _ = ch.basic_get(qname, auto_ack=True)
    assert again.redelivered and count(ch, dlq) == 0


def test_stomp_nack_without_requeue_dead_letters(
    roost: RoostProcess, ch: BlockingChannel, qname: str
) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, durable=True, arguments={"x-dead-letter-exchange": dlq})
    ch.basic_publish("", qname, b"from amqp")
    received: list[Any] = []

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            received.append(frame)

    conn = stomp.Connection12([("127.0.0.1", roost.stomp_port)])
    conn.set_listener("l", Listener())
    conn.connect("guest", "guest", wait=True)
    try:
        conn.subscribe(f"/amq/queue/{qname}", id="s1", ack="client-individual")
        got, props, body = wait_get_after(lambda: bool(received), ch, qname)
        assert got is None  # the STOMP subscriber holds it
        frame = received[0]
        conn.nack(frame.headers["ack"], requeue="false")
        _, props, body = wait_get(ch, dlq)
        assert body == b"from amqp"
        assert props.headers["x-death"][0]["reason"] == "rejected"
    finally:
        conn.disconnect()


def wait_get_after(ready: Any, ch: BlockingChannel, queue: str) -> tuple[Any, Any, Any]:
    """Pump pika until ``ready()`` (a STOMP frame arrived), then basic.get once."""
    deadline = time.monotonic() + 5
    while not ready():
        assert time.monotonic() < deadline, "no STOMP MESSAGE"
        ch.connection.process_data_events(time_limit=0.02)
    return ch.basic_get(queue, auto_ack=True)


def test_rejecting_into_itself_counts_up(ch: BlockingChannel, qname: str) -> None:
    """No cycle when a consumer rejects: RabbitMQ lets it loop and counts."""
    ch.queue_declare(
        qname, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": qname}
    )
    ch.basic_publish("", qname, b"m")
    for _ in range(3):
        method, _, _ = wait_get_manual(ch, qname)
        ch.basic_reject(method.delivery_tag, requeue=False)
    _, props, _ = wait_get(ch, qname)
    (death,) = props.headers["x-death"]
    assert (death["count"], death["reason"]) == (3, "rejected")
    assert list(death) == sorted(death)  # RabbitMQ rewrites a counted-up entry sorted


def wait_get_manual(ch: BlockingChannel, queue: str) -> tuple[Any, Any, Any]:
    """basic.get with manual ack, waiting for the message to come back."""
    deadline = time.monotonic() + 5
    while True:
        got = ch.basic_get(queue)
        if got[0] is not None:
            return got
        assert time.monotonic() < deadline
        ch.connection.process_data_events(time_limit=0.02)


def test_automatic_cycle_is_dropped(
    ch: BlockingChannel, qname: str, roost: RoostProcess
) -> None:
    """a expires into b (and a watch queue), b expires back into a: the message dies once
    in each, then RabbitMQ drops it instead of looping for ever."""
    a, b = qname + ".a", qname + ".b"
    fan = dead_letter_queue(ch, qname + ".fan")  # the watch queue keeps a copy
    ch.queue_declare(b, arguments=ttl_into("", a))
    ch.queue_bind(b, fan)
    ch.queue_declare(a, arguments=ttl_into(fan, None))
    ch.basic_publish("", a, b"m")
    _, props, _ = wait_get(ch, fan)
    assert [d["queue"] for d in props.headers["x-death"]] == [a]
    # b's expiry (20 ms) would send it back into a: a cycle with no rejection, dropped;
    # were it not, a would expire it into the watch queue again 20 ms later
    deadline = time.monotonic() + 5
    while count(ch, b):
        assert time.monotonic() < deadline
        ch.connection.process_data_events(time_limit=0.02)
    ch.connection.process_data_events(time_limit=0.2)
    assert (count(ch, a), count(ch, b), count(ch, fan)) == (0, 0, 0)
    # logged at warning, naming the queues, as RabbitMQ does
    roost.wait_for_log(f"Dead-letter queues cycle detected in vhost '/': ['{a}', '{b}', '{a}']")


def test_invalid_x_death_is_reset_on_reject(ch: BlockingChannel, qname: str) -> None:
    """A client's text x-death (rabbitmq-server#767): reset, as RabbitMQ does, and the
    message reaches the dead-letter queue; the channel stays open."""
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": dlq})
    for junk in ("junk", 5, ["not", "tables"]):
        ch.basic_publish("", qname, b"m", pika.BasicProperties(headers={"x-death": junk}))
        method, _, _ = ch.basic_get(qname)
        ch.basic_reject(method.delivery_tag, requeue=False)
        _, props, body = wait_get(ch, dlq)
        death = props.headers["x-death"][0]
        assert (body, death["count"], death["reason"], death["queue"]) == (
            b"m", 1, "rejected", qname)
        if isinstance(junk, list):  # a client's non-table elements are kept after it
            assert props.headers["x-death"][1:] == junk
    assert ch.is_open and count(ch, qname) == 0


def test_invalid_x_death_on_drop_head_and_expiry(ch: BlockingChannel, qname: str) -> None:
    """Dead-lettering from a publish (drop-head) and from the expiry timer with a bad
    x-death: the publisher is confirmed, and the timer keeps expiring what follows."""
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(
        qname,
        arguments={"x-dead-letter-exchange": dlq, "x-max-length": 1, "x-message-ttl": 100},
    )
    ch.confirm_delivery()  # a failure would close the channel (541) instead of confirming
    junk = pika.BasicProperties(headers={"x-death": "junk"})
    ch.basic_publish("", qname, b"dropped", junk)
    ch.basic_publish("", qname, b"expired", junk)  # drops the head (maxlen)
    first = wait_get(ch, dlq)
    second = wait_get(ch, dlq)  # the head timer fired for a junk x-death...
    ch.basic_publish("", qname, b"later")
    third = wait_get(ch, dlq)  # ...and was armed again for the next message
    assert [(got[2], got[1].headers["x-death"][0]["reason"]) for got in (first, second, third)] \
        == [(b"dropped", "maxlen"), (b"expired", "expired"), (b"later", "expired")]
    assert first[1].headers["x-death"][0]["count"] == 1


def ttl_into(dlx: str, key: str | None) -> dict[str, Any]:
    args: dict[str, Any] = {"x-dead-letter-exchange": dlx, "x-message-ttl": 20}
    if key is not None:
        args["x-dead-letter-routing-key"] = key
    return args


def test_missing_dead_letter_exchange_drops(ch: BlockingChannel, qname: str) -> None:
    ch.queue_declare(qname, arguments={"x-dead-letter-exchange": qname + ".absent"})
    ch.basic_publish("", qname, b"m")
    method, _, _ = ch.basic_get(qname)
    ch.basic_reject(method.delivery_tag, requeue=False)
    assert count(ch, qname) == 0 and ch.is_open


def test_dead_letter_argument_errors(conn: pika.BlockingConnection, qname: str) -> None:
    for args, text in (
        (
            {"x-dead-letter-exchange": 5},
            f"PRECONDITION_FAILED - invalid type 'signedint' for arg 'x-dead-letter-exchange' "
            f"in queue '{qname}' in vhost '/'",
        ),
        (
            {"x-dead-letter-routing-key": "k"},
            f"PRECONDITION_FAILED - invalid arg 'x-dead-letter-routing-key' for queue '{qname}' "
            "in vhost '/': routing_key_but_no_dlx_defined",
        ),
    ):
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            ch.queue_declare(qname, arguments=args)
        assert (err.value.reply_code, err.value.reply_text) == (406, text)


def test_delivery_limit_counts_returns(conn: pika.BlockingConnection, qname: str) -> None:
    """Quorum-queue semantics: x-delivery-count on each delivery; returned more than the
    limit (nack requeue or a closed channel) and it is dead-lettered."""
    ch = conn.channel()
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-delivery-limit": 2, "x-dead-letter-exchange": dlq})
    ch.basic_publish("", qname, b"poison")
    seen = []
    for _ in range(2):
        method, props, _ = ch.basic_get(qname)
        seen.append((method.redelivered, props.headers["x-delivery-count"]))
        ch.basic_nack(method.delivery_tag, requeue=True)
    other = conn.channel()
    method, props, _ = other.basic_get(qname)
    seen.append((method.redelivered, props.headers["x-delivery-count"]))
    other.close()  # a return too
    assert seen == [(False, 0), (True, 1), (True, 2)]
    assert isinstance(props.headers["x-delivery-count"], pika.compat.long)
    _, props, body = wait_get(ch, dlq)
    assert body == b"poison"
    assert "x-delivery-count" not in props.headers
    assert props.headers["x-death"][0]["reason"] == "delivery_limit"
    assert count(ch, qname) == 0


def test_rejected_persistent_message_leaves_the_store(fresh_roost: RoostProcess) -> None:
    """Durable queue → durable dead-letter queue: after a restart the message is in the
    dead-letter queue once and gone from the source."""
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.exchange_declare("dlx", "fanout", durable=True)
    ch.queue_declare("dlq", durable=True)
    ch.queue_bind("dlq", "dlx")
    ch.queue_declare("src", durable=True, arguments={"x-dead-letter-exchange": "dlx"})
    ch.confirm_delivery()
    for i in range(3):
        ch.basic_publish("", "src", b"%d" % i, pika.BasicProperties(delivery_mode=2))
    for _ in range(2):
        method, _, _ = ch.basic_get("src")
        ch.basic_reject(method.delivery_tag, requeue=False)
    conn.close()
    fresh_roost.stop()
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    assert drain(ch, "src") == [b"2"]
    dead = []
    while True:
        method, props, body = ch.basic_get("dlq", auto_ack=True)
        if method is None:
            break
        dead.append((body, props.headers["x-death"][0]["reason"], props.delivery_mode))
    assert dead == [(b"0", "rejected", 2), (b"1", "rejected", 2)]
    conn.close()
