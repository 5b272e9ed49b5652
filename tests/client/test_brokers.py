"""``roost.client``'s asyncio face against a real Roost and a real RabbitMQ 3.10: what a
shovel needs of it (issue 23), each test once per broker."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from roost.amqp import codec_methods as m
from roost.client import (
    ChannelClosed,
    ConnectError,
    ConnectionClosed,
    Message,
    connect,
)
from roost.client.aio import Connection
from tests.client.conftest import Broker
from tests.support import free_port

Test = Callable[[], Awaitable[None]]


def run(test: Test) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


def name(what: str) -> str:
    return f"client-{what}-{uuid.uuid4().hex[:8]}"


def test_declare_bind_publish_get_and_delete(broker: Broker) -> None:
    async def go() -> None:
        conn = await connect(broker.url())
        ch = await conn.channel()
        exchange, queue = name("x"), name("q")
        await ch.exchange_declare(exchange, "direct", durable=False)
        ok = await ch.queue_declare(queue)
        assert (ok.queue, ok.message_count, ok.consumer_count) == (queue, 0, 0)
        await ch.queue_bind(queue, exchange, "k")
        props = m.BasicProperties(content_type="text/plain", delivery_mode=2,
                                  headers={"n": 1, "s": "two"}, message_id="id-1")
        for i in range(3):
            ch.publish(exchange, "k", b"body %d" % i, props)
        got = await ch.get(queue)
        assert isinstance(got, Message)
        assert (got.body, got.exchange, got.routing_key, got.message_count) == (
            b"body 0", exchange, "k", 2)
        assert got.properties == props
        ch.ack(got.delivery_tag)
        await ch.queue_unbind(queue, exchange, "k")
        ch.publish(exchange, "k", b"routed nowhere")  # unbound: dropped
        assert await ch.queue_purge(queue) == 2
        assert await ch.get(queue) is None
        ch.publish("", queue, b"left")
        assert await ch.queue_delete(queue) == 1
        await ch.exchange_delete(exchange)
        with pytest.raises(ChannelClosed) as err:
            await ch.exchange_declare(exchange, passive=True)
        assert err.value.reply_code == 404
        await conn.close()
        assert conn.error is None

    run(go)


def test_exchange_to_exchange_bindings(broker: Broker) -> None:
    async def go() -> None:
        conn = await connect(broker.url())
        ch = await conn.channel()
        source, dest, queue = name("src"), name("dst"), name("q")
        await ch.exchange_declare(source, "topic")
        await ch.exchange_declare(dest, "fanout")
        await ch.exchange_bind(dest, source, "a.#")
        await ch.queue_declare(queue, exclusive=True)
        await ch.queue_bind(queue, dest)
        ch.publish(source, "a.b", b"through two exchanges")
        ch.publish(source, "b.a", b"not bound")
        await ch.exchange_unbind(dest, source, "a.#")
        ch.publish(source, "a.c", b"after the unbind")
        assert (await ch.queue_declare(queue, passive=True)).message_count == 1
        for x in (source, dest):
            await ch.exchange_delete(x)
        await conn.close()

    run(go)


def test_publisher_confirms_and_returns(broker: Broker) -> None:
    async def go() -> None:
        conn = await connect(broker.url())
        ch = await conn.channel()
        queue = name("q")
        await ch.queue_declare(queue, durable=True)
        await ch.confirm_select()
        confirms = [ch.publish("", queue, b"%d" % i, m.BasicProperties(delivery_mode=2))
                    for i in range(500)]
        assert all(await asyncio.gather(*(c for c in confirms if c is not None)))
        assert len(confirms) == 500
        returned: list[Message] = []
        ch.on_return = returned.append
        confirm = ch.publish("", name("nowhere"), b"lost", mandatory=True)
        assert confirm is not None and await confirm is True  # taken, then returned
        assert [(r.reply_code, r.body) for r in returned] == [(312, b"lost")]
        assert (await ch.queue_declare(queue, passive=True)).message_count == 500
        await ch.queue_delete(queue)
        await conn.close()

    run(go)


def test_consume_with_prefetch_and_manual_acks(broker: Broker) -> None:
    async def go() -> None:
        conn = await connect(broker.url())
        ch = await conn.channel()
        queue = name("q")
        await ch.queue_declare(queue)
        for i in range(50):
            ch.publish("", queue, b"%02d" % i)
        got: list[Message] = []
        ten, everything = asyncio.Event(), asyncio.Event()
        acking = False

        def on_message(msg: Message) -> None:
            got.append(msg)
            if acking:
                ch.ack(msg.delivery_tag)
            if len(got) == 10:
                ten.set()
            if len(got) == 51:  # 50, and the one nacked back
                everything.set()

        await ch.qos(10)
        tag = await ch.consume(queue, on_message)
        await ten.wait()
        # prefetch 10: the broker holds the other 40 until acks come
        assert (await ch.queue_declare(queue, passive=True)).message_count == 40
        assert [msg.consumer_tag for msg in got] == [tag] * 10
        acking = True
        ch.nack(got[9].delivery_tag, requeue=True)  # the 10th goes back
        ch.ack(got[8].delivery_tag, multiple=True)  # 1st to 9th
        await everything.wait()
        bodies = [msg.body for msg in got]
        assert sorted(set(bodies)) == [b"%02d" % i for i in range(50)]
        assert [msg.redelivered for msg in got].count(True) == 1
        await ch.cancel(tag)
        assert await ch.queue_delete(queue) == 0
        await conn.close()

    run(go)


def test_broker_refusals_are_typed_and_leave_the_connection_open(broker: Broker) -> None:
    async def go() -> None:
        conn = await connect(broker.url())
        ch = await conn.channel()
        with pytest.raises(ChannelClosed) as err:
            await ch.queue_declare(name("missing"), passive=True)
        assert (err.value.reply_code, err.value.class_id, err.value.method_id) == (404, 50, 10)
        assert "NOT_FOUND" in err.value.reply_text
        with pytest.raises(ChannelClosed):  # the channel is gone, and says why
            ch.publish("", "q", b"x")
        queue = name("q")
        ch = await conn.channel()
        await ch.queue_declare(queue, durable=False)
        with pytest.raises(ChannelClosed) as err:
            await ch.queue_declare(queue, durable=True)
        assert err.value.reply_code == 406
        ch = await conn.channel()
        await ch.queue_delete(queue)
        await conn.close()

    run(go)


def test_login_and_vhost_refusals_are_typed(broker: Broker) -> None:
    async def go() -> None:
        with pytest.raises(ConnectError) as err:
            await connect(broker.url(user="guest:wrong"))
        assert isinstance(err.value.last, ConnectionClosed)
        assert err.value.last.reply_code == 403
        with pytest.raises(ConnectError) as err:
            await connect(broker.url("no-such-vhost"))
        assert isinstance(err.value.last, ConnectionClosed)
        assert err.value.last.reply_code == 530

    run(go)


def test_several_uris_are_tried_in_turn(broker: Broker) -> None:
    async def go() -> None:
        closed_port = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"
        uris = [closed_port, broker.url("no-such-vhost"), broker.url()]
        conn = await connect(uris)
        assert conn.endpoint.port == broker.port and conn.endpoint.vhost == "/"
        await conn.close()
        with pytest.raises(ConnectError) as err:
            await connect(uris[:2])
        assert [uri for uri, _ in err.value.errors] == [
            f"amqp://guest@127.0.0.1:{uris[0].split(':')[-1].split('/')[0]}/%2F",
            f"amqp://guest@127.0.0.1:{broker.port}/no-such-vhost"]
        assert isinstance(err.value.errors[0][1], OSError)

    run(go)


def test_a_close_by_the_broker_fails_what_waits_and_the_caller_reconnects(
    broker: Broker,
) -> None:
    async def go() -> None:
        conn = await connect(broker.url(), name="to-be-closed")
        ch = await conn.channel()
        queue = name("q")
        await ch.queue_declare(queue)
        waiting = asyncio.ensure_future(ch.get(queue))
        await waiting  # an empty get
        await asyncio.to_thread(broker.close_connection, "to-be-closed")
        await asyncio.wait_for(asyncio.shield(conn.closed), 10)
        assert isinstance(conn.error, ConnectionClosed)
        assert conn.error.reply_code == 320
        with pytest.raises(ConnectionClosed):
            await ch.get(queue)
        with pytest.raises(ConnectionClosed):
            await conn.channel()
        again = await connect(broker.url())  # reconnecting is the caller's decision
        await (await again.channel()).queue_delete(queue)
        await again.close()

    run(go)


def test_connection_blocked_holds_drain_until_unblocked(broker: Broker) -> None:
    async def go() -> None:
        conn = await connect(broker.url())
        heard: list[str | None] = []
        conn.on_blocked = heard.append
        ch = await conn.channel()
        queue = name("q")
        await ch.queue_declare(queue)
        ch.publish("", queue, b"before")
        await ch.drain()
        await asyncio.to_thread(broker.memory_alarm, True)
        try:
            ch.publish("", queue, b"during")  # RabbitMQ blocks a connection once it publishes
            while not heard:
                await asyncio.sleep(0.01)
            assert heard[0] in ("low on memory", "low on memory (1MiB watermark)") or (
                heard[0] and "memory" in heard[0]), heard
            draining = asyncio.ensure_future(ch.drain())
            await asyncio.sleep(0.2)
            assert not draining.done()
        finally:
            await asyncio.to_thread(broker.memory_alarm, False)
        await asyncio.wait_for(draining, 10)
        assert heard[-1] is None and conn.blocked is None
        assert (await ch.queue_declare(queue, passive=True)).message_count == 2
        await ch.queue_delete(queue)
        await conn.close()

    run(go)


def test_uri_parameters_reach_the_broker(broker: Broker) -> None:
    """frame_max, channel_max and heartbeat from the URI are what the connection runs
    with: a 20 KB body goes in 8 KB frames, and heartbeats of 1 s keep an idle connection
    alive past the broker's two-missed-beats limit."""

    async def go() -> None:
        conn = await connect(broker.url(query="frame_max=8192&channel_max=3&heartbeat=1"))
        assert (conn.frame_max, conn.amqp.channel_max, conn.amqp.heartbeat) == (8192, 3, 1)
        ch = await conn.channel()
        queue = name("q")
        await ch.queue_declare(queue, exclusive=True)
        body = bytes(range(256)) * 80
        ch.publish("", queue, body)
        got = await ch.get(queue, no_ack=True)
        assert got is not None and got.body == body
        await asyncio.sleep(3.5)  # silent but for heartbeats
        assert conn.error is None
        extra = [await conn.channel() for _ in range(2)]
        assert [c.number for c in extra] == [2, 3]
        with pytest.raises(Exception, match="channels are in use"):
            await conn.channel()
        await conn.close()

    run(go)


def test_a_vhost_with_a_slash_is_percent_encoded(broker: Broker) -> None:
    vhost = f"team/{uuid.uuid4().hex[:6]}"
    broker.add_vhost(vhost)

    async def go() -> None:
        conn = await connect(broker.url(vhost))  # amqp://…/team%2Fxxxxxx
        assert conn.endpoint.vhost == vhost
        ch = await conn.channel()
        await ch.queue_declare(name("q"), exclusive=True)
        await conn.close()

    run(go)


def test_amqps(broker: Broker) -> None:
    async def go() -> None:
        ca = broker.pki.ca_file
        conn = await connect(broker.amqps_url(f"cacertfile={ca}"))
        assert isinstance(conn.transport.get_extra_info("ssl_object"), ssl.SSLObject)  # type: ignore[union-attr]
        ch = await conn.channel()
        queue = name("q")
        await ch.queue_declare(queue, exclusive=True)
        ch.publish("", queue, b"over TLS")
        got = await ch.get(queue, no_ack=True)
        assert got is not None and got.body == b"over TLS"
        await conn.close()
        with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await connect(broker.amqps_url())  # the system's CAs do not know ours
        with pytest.raises(ConnectError, match=r"Hostname mismatch|doesn.t match"):
            await connect(broker.amqps_url(
                f"cacertfile={ca}&server_name_indication=other.example"))
        unverified = await connect(broker.amqps_url("verify=verify_none"))
        await unverified.close()

    run(go)


def test_external_login_with_a_client_certificate(broker: Broker) -> None:
    cert = broker.pki.client_cert("guest")  # CN=guest; RabbitMQ with its EXTERNAL plugin

    async def go() -> None:
        conn = await connect(broker.amqps_url(
            f"cacertfile={broker.pki.ca_file}&certfile={cert.cert}&keyfile={cert.key}"
            "&auth_mechanism=external"))
        assert conn.amqp.mechanism == "EXTERNAL"
        await (await conn.channel()).queue_declare(name("q"), exclusive=True)
        await conn.close()

    run(go)


class Counting(Connection):
    """A subclass that takes raw frames first, as ``roost perf`` does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frames = 0

    def frames_received(self, frames: list[Any]) -> None:
        self.frames += len(frames)
        super().frames_received(frames)


def test_a_subclass_sees_every_frame(broker: Broker) -> None:
    async def go() -> None:
        conn = await connect(broker.url(), Counting, product="roost-test")
        ch = await conn.channel()
        await ch.queue_declare(name("q"), exclusive=True)
        assert conn.frames >= 4  # start, tune, open-ok, channel.open-ok, declare-ok
        assert conn.server.split()[0] in ("Roost", "RabbitMQ")
        await conn.close()

    run(go)
