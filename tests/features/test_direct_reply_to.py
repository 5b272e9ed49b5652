"""Direct reply-to (``amq.rabbitmq.reply-to``), each behaviour checked against RabbitMQ
3.10.8 with the same pika calls (see core/features/direct_reply.py for the one
difference: a delivered reply published with mandatory is not also returned)."""

from __future__ import annotations

import time
from typing import Any

import amqp
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

from tests.features.conftest import Returns, pika_params, pump, settle
from tests.support import RoostProcess

REPLY_TO = "amq.rabbitmq.reply-to"

Delivery = tuple[Any, Any, bytes]


def _consume_replies(channel: BlockingChannel) -> tuple[str, list[Delivery]]:
    got: list[Delivery] = []
    tag = channel.basic_consume(
        REPLY_TO, lambda _ch, method, props, body: got.append((method, props, body)), auto_ack=True
    )
    return tag, got


def _request(channel: BlockingChannel, queue: str, body: bytes, corr: str = "c1") -> None:
    channel.basic_publish(
        "", queue, body, pika.BasicProperties(reply_to=REPLY_TO, correlation_id=corr)
    )


def _take(channel: BlockingChannel, queue: str, timeout: float = 5.0) -> Delivery:
    """The next request; it comes from another connection, so it may still be on the way."""
    deadline = time.monotonic() + timeout
    while True:
        method, props, body = channel.basic_get(queue, auto_ack=True)
        if method is not None or time.monotonic() > deadline:
            assert method is not None, f"nothing arrived in {queue}"
            return method, props, body
        channel.connection.process_data_events(time_limit=0.01)


@pytest.fixture
def server_ch(roost: RoostProcess) -> Any:
    """The responder: a connection of its own."""
    connection = pika.BlockingConnection(pika_params(roost))
    yield connection.channel()
    if connection.is_open:
        connection.close()


def test_rpc_round_trip(
    conn: pika.BlockingConnection, ch: BlockingChannel, server_ch: BlockingChannel, name: str
) -> None:
    server_ch.queue_declare(name)
    tag, replies = _consume_replies(ch)
    _request(ch, name, b"2+2")
    method, props, body = _take(server_ch, name)
    assert body == b"2+2"
    assert props.reply_to.startswith(REPLY_TO + ".") and len(props.reply_to) > len(REPLY_TO) + 8
    server_ch.basic_publish(
        "", props.reply_to, b"4", pika.BasicProperties(correlation_id=props.correlation_id)
    )
    assert pump(conn, lambda: bool(replies))
    method, reply_props, reply = replies[0]
    assert reply == b"4" and reply_props.correlation_id == "c1"
    assert method.consumer_tag == tag and method.exchange == ""
    assert method.routing_key == props.reply_to and method.redelivered is False


def test_each_channel_gets_its_own_replies(
    conn: pika.BlockingConnection, server_ch: BlockingChannel, name: str
) -> None:
    server_ch.queue_declare(name)
    first, second = conn.channel(), conn.channel()
    _tag1, got1 = _consume_replies(first)
    _tag2, got2 = _consume_replies(second)
    _request(first, name, b"one")
    _request(second, name, b"two")
    for _ in range(2):
        _m, props, body = _take(server_ch, name)
        server_ch.basic_publish("", props.reply_to, b"re:" + body)
    assert pump(conn, lambda: bool(got1) and bool(got2))
    assert [b for _m, _p, b in got1] == [b"re:one"] and [b for _m, _p, b in got2] == [b"re:two"]


def test_consuming_with_acks_is_refused(ch: BlockingChannel) -> None:
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.basic_consume(REPLY_TO, lambda *_a: None, auto_ack=False)
    assert err.value.args == (406, "PRECONDITION_FAILED - reply consumer cannot acknowledge")


def test_a_second_reply_consumer_on_a_channel_is_refused(ch: BlockingChannel) -> None:
    _consume_replies(ch)
    with pytest.raises(ChannelClosedByBroker) as err:
        _consume_replies(ch)
    assert err.value.args == (406, "PRECONDITION_FAILED - reply consumer already set")


def test_requesting_without_a_reply_consumer_is_refused(
    conn: pika.BlockingConnection, name: str
) -> None:
    ch = conn.channel()
    ch.queue_declare(name)
    _request(ch, name, b"nobody listens")
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.queue_declare(name)
    assert err.value.args == (406, "PRECONDITION_FAILED - fast reply consumer does not exist")
    assert conn.channel().queue_declare(name, passive=True).method.message_count == 0
    ch = conn.channel()  # after a cancel, likewise
    tag, _got = _consume_replies(ch)
    ch.basic_cancel(tag)
    _request(ch, name, b"cancelled")
    with pytest.raises(ChannelClosedByBroker):
        ch.queue_declare(name)


def test_declare_tells_whether_the_requester_is_still_there(
    conn: pika.BlockingConnection, server_ch: BlockingChannel, name: str
) -> None:
    ok = server_ch.queue_declare(REPLY_TO).method
    assert (ok.queue, ok.message_count, ok.consumer_count) == (REPLY_TO, 0, 1)
    server_ch.queue_declare(name)
    requester = conn.channel()
    _consume_replies(requester)
    _request(requester, name, b"q")
    reply_to = _take(server_ch, name)[1].reply_to
    ok = server_ch.queue_declare(reply_to, passive=True).method
    assert (ok.queue, ok.message_count, ok.consumer_count) == (reply_to, 0, 1)
    requester.close()
    with pytest.raises(ChannelClosedByBroker) as err:
        server_ch.queue_declare(reply_to, passive=True)
    assert err.value.args == (404, f"NOT_FOUND - no queue '{reply_to}' in vhost '/'")


def test_replies_to_a_gone_requester_are_dropped_or_returned(
    conn: pika.BlockingConnection, roost: RoostProcess, name: str
) -> None:
    responder = pika.BlockingConnection(pika_params(roost))
    try:
        server_ch = responder.channel()
        server_ch.queue_declare(name)
        returns = Returns(server_ch)
        requester = conn.channel()
        tag, got = _consume_replies(requester)
        _request(requester, name, b"q")
        reply_to = _take(server_ch, name)[1].reply_to
        server_ch.basic_publish("", reply_to, b"delivered", mandatory=True)
        assert pump(conn, lambda: bool(got))
        requester.basic_cancel(tag)
        server_ch.basic_publish("", reply_to, b"after cancel", mandatory=True)
        server_ch.basic_publish("", reply_to, b"dropped quietly")
        server_ch.basic_publish(
            "amq.direct", reply_to, b"not via the default exchange", mandatory=True
        )
        settle(responder)
        settle(conn, 0.1)
        assert [b for _m, _p, b in got] == [b"delivered"]
        assert [(r[0], r[1], r[3]) for r in returns.items] == [
            (312, "", b"after cancel"),
            (312, "amq.direct", b"not via the default exchange"),
        ]
    finally:
        responder.close()


def test_py_amqp_requester(roost: RoostProcess, server_ch: BlockingChannel, name: str) -> None:
    server_ch.queue_declare(name)
    with amqp.Connection(f"127.0.0.1:{roost.amqp_port}") as connection:
        channel = connection.channel()
        replies: list[amqp.Message] = []
        channel.basic_consume(REPLY_TO, no_ack=True, callback=replies.append)
        channel.basic_publish(
            amqp.Message(b"ping", reply_to=REPLY_TO, correlation_id="p1"), "", name
        )
        _m, props, _body = _take(server_ch, name)
        server_ch.basic_publish(
            "", props.reply_to, b"pong", pika.BasicProperties(correlation_id="p1")
        )
        connection.drain_events(timeout=5)
        assert [(m.body, m.properties["correlation_id"]) for m in replies] == [(b"pong", "p1")]
