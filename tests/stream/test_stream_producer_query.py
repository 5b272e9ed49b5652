"""A producer's last publishing id, by name, in one round trip: the amq.roost.producers
request-reply over AMQP (pika) and GET /api/queues/{vhost}/{stream}/producers/{name},
with more producers than the offset query's capped table lists."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pika.exceptions
import pytest

from tests.security.conftest import amqp_as, put
from tests.stream.conftest import declare_stream, query, read
from tests.support import RoostProcess, pump

EXCHANGE = "amq.roost.producers"
PRODUCERS = 5000


def producer_name(i: int) -> str:
    return f"app-{i:05d}"


def last_id(i: int) -> int:
    """Each producer's last id: distinct per producer, so a wrong lookup shows."""
    return 1000 + 7 * i


@pytest.fixture(scope="module")
def crowded(roost: RoostProcess) -> Iterator[str]:
    """A stream that has seen PRODUCERS producers, producer 0 first and never since, so
    it is long gone from the offset query's table."""
    stream = f"producers-{uuid.uuid4().hex[:8]}"
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        declare_stream(ch, stream)
        for i in range(PRODUCERS):
            for publishing_id in (last_id(i) - 1, last_id(i)):
                headers = {"x-stream-producer-name": producer_name(i),
                           "x-publishing-id": publishing_id}
                ch.basic_publish("", stream, b"", pika.BasicProperties(headers=headers))
        info = query(ch, stream)  # a round trip after every publish
    assert info["x-stream-next-offset"] == 2 * PRODUCERS
    assert info["x-stream-producer-count"] == PRODUCERS
    assert producer_name(0) not in info["x-stream-producers"]  # the table is capped
    yield stream


def ask(
    conn: pika.BlockingConnection,
    ch: Any,
    stream: str,
    producer: str,
    *,
    reply_to: str = "amq.rabbitmq.reply-to",
) -> pika.BasicProperties:
    """Publish a query and wait for its reply, consumed from ``reply_to`` (direct reply-to
    by default, or a queue's name)."""
    correlation = uuid.uuid4().hex
    replies: list[pika.BasicProperties] = []
    tag = ch.basic_consume(reply_to, lambda c, m, p, b: replies.append(p), auto_ack=True)
    ch.basic_publish(
        EXCHANGE,
        stream,
        b"",
        pika.BasicProperties(
            headers={"x-stream-producer-name": producer},
            reply_to=reply_to,
            correlation_id=correlation,
        ),
    )
    assert pump(conn, lambda: bool(replies) or not ch.is_open, timeout=10.0)
    assert ch.is_open, "the broker closed the channel"
    ch.basic_cancel(tag)
    (props,) = replies
    assert props.correlation_id == correlation
    return props


def test_the_oldest_of_5000_producers_learns_its_last_id_and_resumes_after_it(
    roost: RoostProcess, crowded: str
) -> None:
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        reply = ask(conn, ch, crowded, producer_name(0))
        assert reply.headers == {
            "x-stream": crowded,
            "x-stream-producer-name": producer_name(0),
            "x-publishing-id": last_id(0),
        }
        # the restarted producer resumes: its last message again is a duplicate, the next
        # one is new (confirmed both ways, stored once)
        pub = conn.channel()
        pub.confirm_delivery()
        for publishing_id in (last_id(0), last_id(0) + 1):
            headers = {"x-stream-producer-name": producer_name(0),
                       "x-publishing-id": publishing_id}
            pub.basic_publish("", crowded, b"resumed", pika.BasicProperties(headers=headers))
        assert query(pub, crowded)["x-stream-next-offset"] == 2 * PRODUCERS + 1
        assert ask(conn, ch, crowded, producer_name(0)).headers["x-publishing-id"] == (
            last_id(0) + 1
        )
        # a producer from the middle, and the replies go to a named queue too
        reply_queue = ch.queue_declare("", exclusive=True).method.queue
        other = conn.channel()
        reply = ask(conn, other, crowded, producer_name(2345), reply_to=reply_queue)
        assert reply.headers["x-publishing-id"] == last_id(2345)


def test_an_unknown_producer_gets_a_reply_without_an_id(
    roost: RoostProcess, crowded: str
) -> None:
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        reply = ask(conn, ch, crowded, "never-published")
        assert reply.headers == {"x-stream": crowded, "x-stream-producer-name": "never-published"}
        ch.queue_declare("empty." + crowded, durable=True, arguments={"x-queue-type": "stream"})
        reply = ask(conn, conn.channel(), "empty." + crowded, producer_name(0))
        assert "x-publishing-id" not in reply.headers


@pytest.mark.parametrize(
    ("case", "code", "words"),
    [
        ("missing-stream", 404, "no queue 'no-such-stream"),
        ("classic-queue", 406, "is not a stream"),
        ("no-producer-header", 406, "x-stream-producer-name"),
        ("no-reply-to", 406, "reply_to"),
        ("missing-reply-queue", 404, "no queue 'no-such-reply"),
    ],
)
def test_bad_queries_close_the_channel_and_nothing_else(
    roost: RoostProcess, crowded: str, qname: str, case: str, code: int, words: str
) -> None:
    stream = {"missing-stream": "no-such-stream-" + qname, "classic-queue": qname}.get(
        case, crowded
    )
    headers = {} if case == "no-producer-header" else {"x-stream-producer-name": "app-00001"}
    reply_to = {"no-reply-to": None, "missing-reply-queue": "no-such-reply-" + qname}.get(
        case, "amq.rabbitmq.reply-to"
    )
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(qname)
        ch.basic_consume("amq.rabbitmq.reply-to", lambda *a: None, auto_ack=True)
        ch.basic_publish(
            EXCHANGE, stream, b"", pika.BasicProperties(headers=headers, reply_to=reply_to)
        )
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
            ch.queue_declare(qname, passive=True)  # a round trip: the close comes first
        assert info.value.reply_code == code, info.value
        assert words in info.value.reply_text
        # the connection and its other channels carry on
        reply = ask(conn, conn.channel(), crowded, producer_name(1))
        assert reply.headers["x-publishing-id"] == last_id(1)


@pytest.fixture
def admin(roost: RoostProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=roost.http_url + "/api", auth=("guest", "guest")) as client:
        yield client


def user_with(admin: httpx.Client, write: str, read: str, tags: str = "") -> str:
    name = f"producers-{uuid.uuid4().hex[:8]}"
    put(admin, f"/users/{name}", {"password": "pw", "tags": tags})
    put(admin, f"/permissions/%2F/{name}", {"configure": "", "write": write, "read": read})
    return name


def refused(roost: RoostProcess, user: str, stream: str, reply_to: str) -> str:
    """The 403 a query as ``user`` gets; its reply text."""
    with amqp_as(roost, user) as conn:
        ch = conn.channel()
        ch.basic_consume("amq.rabbitmq.reply-to", lambda *a: None, auto_ack=True)
        headers = {"x-stream-producer-name": producer_name(3)}
        ch.basic_publish(
            EXCHANGE, stream, b"", pika.BasicProperties(headers=headers, reply_to=reply_to)
        )
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
            ch.basic_qos(prefetch_count=0)  # a round trip: the close comes first
        assert info.value.reply_code == 403, info.value
        return str(info.value.reply_text)


def test_rights_write_on_the_exchange_read_on_the_stream(
    roost: RoostProcess, crowded: str, admin: httpx.Client
) -> None:
    # enough: write on the exchange, read on the stream; direct reply-to needs no more
    ok = user_with(admin, write=f"^{EXCHANGE}$", read=f"^{crowded}$")
    with amqp_as(roost, ok) as conn:
        reply = ask(conn, conn.channel(), crowded, producer_name(3))
        assert reply.headers["x-publishing-id"] == last_id(3)

    no_read = user_with(admin, write=f"^{EXCHANGE}$", read="^nothing$")
    text = refused(roost, no_read, crowded, "amq.rabbitmq.reply-to")
    assert f"read access to queue '{crowded}'" in text

    no_write = user_with(admin, write="^nothing$", read=".*")
    text = refused(roost, no_write, crowded, "amq.rabbitmq.reply-to")
    assert f"write access to exchange '{EXCHANGE}'" in text


def test_a_reply_to_a_named_queue_needs_write_on_the_default_exchange(
    roost: RoostProcess, crowded: str, admin: httpx.Client, qname: str
) -> None:
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        conn.channel().queue_declare(qname)
        user = user_with(admin, write=f"^{EXCHANGE}$", read=".*")
        text = refused(roost, user, crowded, qname)
        assert "write access to exchange 'amq.default'" in text
        method, _props, _body = conn.channel().basic_get(qname, auto_ack=True)
        assert method is None  # nothing was put into the queue
        allowed = user_with(admin, write=f"^({EXCHANGE}|amq\\.default)$", read=".*")
        with amqp_as(roost, allowed) as as_user:
            reply = ask(as_user, as_user.channel(), crowded, producer_name(3), reply_to=qname)
        assert reply.headers["x-publishing-id"] == last_id(3)


def test_http_lookup(roost: RoostProcess, crowded: str, admin: httpx.Client, qname: str) -> None:
    def lookup(stream: str, producer: str, auth: tuple[str, str] = ("guest", "guest")) -> Any:
        return httpx.get(
            f"{roost.http_url}/api/queues/%2F/{stream}/producers/{producer}", auth=auth
        )

    # producer 1: long out of the offset query's table (producer 0 may have resumed)
    found = lookup(crowded, producer_name(1))
    assert found.status_code == 200, found.text
    assert found.json() == {
        "vhost": "/", "stream": crowded, "producer": producer_name(1), "publishing_id": last_id(1)
    }
    unknown = lookup(crowded, "never-published")
    assert unknown.status_code == 200 and unknown.json()["publishing_id"] is None
    missing = lookup("no-such-stream-" + qname, producer_name(0))
    assert missing.status_code == 404, missing.text
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        conn.channel().queue_declare(qname)
    classic = lookup(qname, producer_name(0))
    assert classic.status_code == 400 and "not a stream" in classic.text
    reader = user_with(admin, write="", read="^nothing$", tags="management")
    denied = lookup(crowded, producer_name(0), (reader, "pw"))
    assert denied.status_code == 403, denied.text


def test_an_offset_commit_needs_read_on_the_stream(
    roost: RoostProcess, crowded: str, admin: httpx.Client
) -> None:
    """Write on amq.roost.offsets alone must not let a user move the stored offsets of a
    stream they may not read (it did, before the commit checked read)."""

    def commit(user: str, offset: int) -> None:
        with amqp_as(roost, user) as conn:
            ch = conn.channel()
            ch.basic_publish(
                "amq.roost.offsets",
                crowded,
                b"",
                pika.BasicProperties(
                    headers={"x-stream-consumer-name": "auditor", "x-stream-offset": offset}
                ),
            )
            ch.basic_qos(prefetch_count=0)  # a round trip: a refusal closes the channel first

    no_read = user_with(admin, write="^amq\\.roost\\.offsets$", read="^nothing$")
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        commit(no_read, 7)
    assert info.value.reply_code == 403
    assert f"read access to queue '{crowded}'" in str(info.value.reply_text)

    allowed = user_with(admin, write="^amq\\.roost\\.offsets$", read=f"^{crowded}$")
    commit(allowed, 7)
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        args = {"x-stream-offset": "stored", "x-stream-consumer-name": "auditor"}
        got = read(conn, conn.channel(), crowded, 1, args, ack=False)
    assert got[0][0] == 8, "the allowed commit stored offset 7: the consumer resumes at 8"
