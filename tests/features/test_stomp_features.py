"""Queue features from STOMP (stomp.py and pika against one server): queue arguments on
the SEND or SUBSCRIBE that declares a /queue/, TTL from the ``expiration`` header, the
delivery limit with NACK, refusals answered with their reason, and replies between
STOMP and AMQP (direct reply-to, temp queues).

Checked against RabbitMQ 3.10.8's STOMP plugin where it has the feature: it declares
with x-max-length, x-message-ttl, x-dead-letter-*, x-max-priority (not x-overflow,
x-delivery-limit or x-single-active-consumer: Roost reads those too); it shows an AMQP
reply-to as /reply-queue/<name> and delivers a SEND to it, amq.rabbitmq.reply-to.<token>
included; and it closes the connection without a frame when a SEND with a receipt is
refused (Roost sends an ERROR naming why, then closes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.features.conftest import count, dead_letter_queue, drain, pump, settle, wait_get
from tests.stomp.conftest import Connect


@pytest.fixture
def json_only(http: httpx.Client, qname: str) -> Iterator[str]:
    """A policy letting only JSON objects into ``qname``."""
    body = {"pattern": f"^{re.escape(qname)}$", "apply-to": "queues", "definition": {
        "message-mutators": ["json-schema"],
        "message-mutator-args": {"json-schema": {"schema": {"type": "object"}}}}}
    assert http.put(f"/api/policies/%2F/{qname}", json=body).status_code == 201
    yield qname
    http.delete(f"/api/policies/%2F/{qname}")


def test_send_headers_declare_a_length_limit_and_a_full_queue_refuses_with_its_reason(
    connect: Connect, ch: BlockingChannel, http: httpx.Client, qname: str
) -> None:
    client, inbox = connect()
    limit = {"x-max-length": "1", "x-overflow": "reject-publish"}
    client.send(f"/queue/{qname}", "first", headers=limit, receipt="r1")
    assert inbox.receipt() == "r1"
    # the arguments are typed as an AMQP client sends them: redeclaring with ints is fine
    ch.queue_declare(qname, durable=True, arguments={"x-max-length": 1,
                                                     "x-overflow": "reject-publish"})
    assert http.get(f"/api/queues/%2F/{qname}").json()["arguments"] == {
        "x-max-length": 1, "x-overflow": "reject-publish"}
    client.send(f"/queue/{qname}", "second", headers=limit, receipt="r2")
    error = inbox.errors.get(timeout=5)
    assert error.headers["message"] == "message refused"
    assert error.headers["receipt-id"] == "r2"
    assert error.body == f"queue '{qname}' in vhost '/' is full (overflow reject-publish)"
    assert inbox.disconnected.get(timeout=5)
    assert drain(ch, qname) == [b"first"]  # the refused one was not kept either


def test_reject_publish_dlx_refusal_is_dead_lettered_and_reported(
    connect: Connect, ch: BlockingChannel, qname: str
) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname, arguments={"x-max-length": 0, "x-overflow": "reject-publish-dlx",
                                       "x-dead-letter-exchange": dlq})
    client, inbox = connect()
    client.send(f"/amq/queue/{qname}", "refused", receipt="r1")
    error = inbox.errors.get(timeout=5)
    assert error.body == f"queue '{qname}' in vhost '/' is full (overflow reject-publish-dlx)"
    _, props, body = wait_get(ch, dlq)
    assert body == b"refused" and props.headers["x-death"][0]["reason"] == "maxlen"


def test_a_mutator_refusal_is_reported(
    connect: Connect, ch: BlockingChannel, json_only: str
) -> None:
    ch.queue_declare(json_only)
    client, inbox = connect()
    client.send(f"/amq/queue/{json_only}", '{"ok": 1}', receipt="r1")
    assert inbox.receipt() == "r1"
    client.send(f"/amq/queue/{json_only}", "not json", receipt="r2")
    error = inbox.errors.get(timeout=5)
    assert (error.headers["message"], error.headers["receipt-id"]) == ("message refused", "r2")
    assert error.body.startswith(
        f"message refused by queue '{json_only}' in vhost '/': json-schema: body is not JSON")
    assert drain(ch, json_only) == [b'{"ok": 1}']


def test_expiration_header_expires_and_dead_letters(
    connect: Connect, ch: BlockingChannel, qname: str
) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    client, inbox = connect()
    client.send(f"/queue/{qname}", "short-lived", receipt="r1",
                headers={"x-dead-letter-exchange": dlq, "expiration": "100"})
    assert inbox.receipt() == "r1"
    _, props, body = wait_get(ch, dlq)
    death = props.headers["x-death"][0]
    assert (body, death["reason"], death["queue"], death["original-expiration"]) == (
        b"short-lived", "expired", qname, "100")
    assert count(ch, qname) == 0


def test_send_headers_declare_a_queue_ttl(
    connect: Connect, ch: BlockingChannel, qname: str
) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    client, inbox = connect()
    headers = {"x-message-ttl": "100", "x-dead-letter-exchange": dlq,
               "x-dead-letter-routing-key": "expired"}
    client.send(f"/queue/{qname}", "m", headers=headers, receipt="r1")
    assert inbox.receipt() == "r1"
    got, props, body = wait_get(ch, dlq)
    assert (body, got.routing_key, props.headers["x-death"][0]["reason"]) == (
        b"m", "expired", "expired")


def test_subscribe_headers_declare_a_priority_queue(
    connect: Connect, ch: BlockingChannel, qname: str
) -> None:
    client, inbox = connect()
    client.subscribe(f"/queue/{qname}", id="s", ack="client-individual",
                     headers={"x-max-priority": "5", "prefetch-count": "1"}, receipt="r1")
    assert inbox.receipt() == "r1"
    for body, priority in (("first", 0), ("low", 1), ("high", 5), ("mid", 3)):
        ch.basic_publish("", qname, body.encode(), pika.BasicProperties(priority=priority))
    got = []
    for _ in range(4):
        frame = inbox.message()
        got.append(frame.body)
        client.ack(frame.headers["ack"])
    assert got == ["first", "high", "mid", "low"]  # the first went out before the rest came


def test_delivery_limit_with_nack_requeue_and_the_delivery_count_header(
    connect: Connect, ch: BlockingChannel, qname: str
) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    client, inbox = connect()
    client.subscribe(f"/queue/{qname}", id="s", ack="client-individual", receipt="r1",
                     headers={"x-delivery-limit": "1", "x-dead-letter-exchange": dlq})
    assert inbox.receipt() == "r1"
    ch.basic_publish("", qname, b"poison")
    counts = []
    for _ in range(2):
        frame = inbox.message()
        counts.append(frame.headers["x-delivery-count"])
        client.nack(frame.headers["ack"], requeue="true")
    assert counts == ["0", "1"]
    _, props, body = wait_get(ch, dlq)  # returned more often than the limit
    assert body == b"poison" and props.headers["x-death"][0]["reason"] == "delivery_limit"
    inbox.no_message()


def test_single_active_consumer_from_subscribe_headers(
    connect: Connect, conn: pika.BlockingConnection, ch: BlockingChannel, qname: str
) -> None:
    sac = {"x-single-active-consumer": "true"}
    first, first_inbox = connect()
    second, second_inbox = connect()
    first.subscribe(f"/queue/{qname}", id="a", headers=sac, receipt="r1")
    assert first_inbox.receipt() == "r1"
    second.subscribe(f"/queue/{qname}", id="b", headers=sac, receipt="r2")
    assert second_inbox.receipt() == "r2"
    for i in range(3):
        ch.basic_publish("", qname, b"m%d" % i)
    assert [first_inbox.message().body for _ in range(3)] == ["m0", "m1", "m2"]
    second_inbox.no_message()
    first.unsubscribe("a", receipt="r3")
    assert first_inbox.receipt() == "r3"
    ch.basic_publish("", qname, b"m3")
    assert second_inbox.message().body == "m3"  # the next in line took over
    settle(conn, 0.05)


def test_send_headers_declare_a_deduplicating_queue(
    connect: Connect, ch: BlockingChannel, qname: str
) -> None:
    """``x-message-deduplication`` (and its cache settings) from the declaring SEND, as
    from queue.declare; a message's ``x-deduplication-header`` travels as a header."""
    client, inbox = connect()
    declare = {"x-message-deduplication": "true", "x-cache-size": "100"}
    for n, key in enumerate(["a", "a", "b", "a"]):
        client.send(f"/queue/{qname}", f"{key}{n}", receipt=f"r{n}",
                    headers={**declare, "x-deduplication-header": key})
        assert inbox.receipt() == f"r{n}"
    assert drain(ch, qname) == [b"a0", b"b2"]


def test_stomp_responder_answers_an_amqp_direct_reply_to_request(
    connect: Connect, conn: pika.BlockingConnection, ch: BlockingChannel, qname: str
) -> None:
    replies: list[tuple[bytes, str]] = []
    ch.basic_consume("amq.rabbitmq.reply-to", auto_ack=True,
                     on_message_callback=lambda c, m, p, b: replies.append((b, m.routing_key)))
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"ping", pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    client, inbox = connect()
    client.subscribe(f"/amq/queue/{qname}", id="s")
    request = inbox.message()
    reply_to = request.headers["reply-to"]
    assert reply_to.startswith("/reply-queue/amq.rabbitmq.reply-to.")
    client.send(reply_to, "pong", receipt="r1")
    assert inbox.receipt() == "r1"
    assert pump(conn, lambda: bool(replies))
    assert replies == [(b"pong", reply_to.removeprefix("/reply-queue/"))]


def test_amqp_responder_answers_a_stomp_temp_queue_request(
    connect: Connect, ch: BlockingChannel, qname: str
) -> None:
    ch.queue_declare(qname)
    client, inbox = connect()
    client.send(f"/amq/queue/{qname}", "ping", headers={"reply-to": "/temp-queue/answers"},
                receipt="r1")
    assert inbox.receipt() == "r1"
    _, props, _ = wait_get(ch, qname)
    assert not props.reply_to.startswith("/")  # a queue name an AMQP client can publish to
    ch.basic_publish("", props.reply_to, b"pong")
    reply = inbox.message()
    assert (reply.body, reply.headers["destination"]) == ("pong", "/temp-queue/answers")
