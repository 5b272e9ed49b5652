"""Publisher flow control against a real server: a congested queue pauses reading of its
publishers' sockets (bounding the backlog), and never deadlocks a connection that both
publishes and consumes, nor waits for ever on a consumer that stopped acking."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import pika

from roost.amqp import codec
from roost.client import Channel, Connection, ConnectionClosed, Message
from roost.client import connect as client_connect
from roost.core.flow import HIGH_MESSAGES
from tests.support import RoostProcess, until


class Peer:
    """A roost.client connection that can consume and hands every delivery to a hook."""

    def __init__(self, conn: Connection, ch: Channel) -> None:
        self.conn, self.ch = conn, ch
        self.on_deliver: Callable[[int], None] | None = None
        self.delivered = 0

    def _delivery(self, msg: Message) -> None:
        self.delivered += 1
        if self.on_deliver is not None:
            self.on_deliver(msg.delivery_tag)

    def ack(self, tag: int) -> None:
        self.ch.ack(tag)

    async def consume(self, queue: str, prefetch: int) -> None:
        await self.ch.qos(prefetch)
        await self.ch.consume(queue, self._delivery)

    def publish_many(self, queue: str, n: int) -> None:
        """``n`` publishes in one socket write, as a producer that never waits sends them."""
        one = codec.encode_basic_publish(
            self.ch.number, "", queue, False, False, b"\x00\x00", b"0123456789abcdef",
            self.conn.frame_max,
        )
        self.conn.write(one * n)

    @property
    def transport(self) -> asyncio.Transport | None:
        return self.conn.transport

    async def close(self) -> None:
        await self.conn.close()


async def connect(server: RoostProcess) -> Peer:
    conn = await client_connect(server.url)
    return Peer(conn, await conn.channel())


def ready_count(server: RoostProcess, queue: str) -> int:
    conn = pika.BlockingConnection(pika.URLParameters(server.url))
    try:
        ok = conn.channel().queue_declare(queue, passive=True)
        return int(ok.method.message_count)
    finally:
        conn.close()


def connection_states(server: RoostProcess) -> list[str]:
    """Each connection's state from the management API (RabbitMQ's "flow" when held)."""
    reply = httpx.get(f"{server.http_url}/api/connections", auth=("guest", "guest"), timeout=5)
    reply.raise_for_status()
    return [c["state"] for c in reply.json()]


def declare(server: RoostProcess, queue: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(server.url))
    conn.channel().queue_declare(queue)
    conn.close()


def test_flooding_publisher_is_held_at_the_high_watermark(
    fresh_roost: RoostProcess, qname: str
) -> None:
    total = 60_000  # ~2.7 MB of frames: read in well under a second when nothing holds it
    declare(fresh_roost, qname)

    async def run() -> None:
        consumer = await connect(fresh_roost)
        slow = True
        pending: list[int] = []

        def on_deliver(tag: int) -> None:
            if slow:
                pending.append(tag)  # acked by the trickle below, one every 5 ms
            else:
                consumer.ack(tag)

        consumer.on_deliver = on_deliver
        await consumer.consume(qname, prefetch=10)
        publisher = await connect(fresh_roost)
        publisher.publish_many(qname, total)
        # the consumer makes progress (so the queue is not stalled), slowly
        peak = 0
        stop_at = time.monotonic() + 2.5
        while time.monotonic() < stop_at:
            while pending:
                consumer.ack(pending.pop(0))
            await asyncio.sleep(0.005)
            if int(time.monotonic() * 10) % 5 == 0:
                peak = max(peak, await asyncio.to_thread(ready_count, fresh_roost, qname))
        taken = consumer.delivered + await asyncio.to_thread(ready_count, fresh_roost, qname)
        # Without flow control the broker reads them all within a second or two.
        assert taken < total / 2, taken
        assert peak < HIGH_MESSAGES + 10_000, peak  # one socket read beyond the mark
        assert publisher.transport is not None
        assert publisher.transport.get_write_buffer_size() > 0  # the socket is not read
        states = await asyncio.to_thread(connection_states, fresh_roost)
        assert sorted(states) == ["flow", "running"], states  # publisher held, consumer not
        slow = False
        for tag in pending:
            consumer.ack(tag)
        await until(lambda: consumer.delivered == total, 30)
        await publisher.close()
        await consumer.close()

    asyncio.run(run())
    assert "stalled" not in fresh_roost.log


def test_one_connection_publishing_and_consuming_with_manual_acks(
    fresh_roost: RoostProcess, qname: str
) -> None:
    """Acks share the socket with the publishes: pausing it would block the acks."""
    total = 60_000
    declare(fresh_roost, qname)

    async def run() -> None:
        conn = await connect(fresh_roost)
        conn.on_deliver = conn.ack
        await conn.consume(qname, prefetch=100)
        conn.publish_many(qname, total)
        await until(lambda: conn.delivered == total, 30)
        await conn.close()

    asyncio.run(run())
    # Had the connection been paused, its acks would have waited behind its publishes and
    # only the stall watchdog would have got it going again.
    assert "stalled" not in fresh_roost.log


def test_consumer_that_stops_acking_does_not_hold_publishers_for_ever(
    fresh_roost: RoostProcess, qname: str
) -> None:
    total = 40_000
    declare(fresh_roost, qname)

    async def run() -> None:
        consumer = await connect(fresh_roost)
        await consumer.consume(qname, prefetch=1)  # takes one message, never acks
        publisher = await connect(fresh_roost)
        publisher.publish_many(qname, total)

        async def all_in() -> bool:
            return await asyncio.to_thread(ready_count, fresh_roost, qname) == total - 1

        deadline = time.monotonic() + 20
        while not await all_in():
            assert time.monotonic() < deadline, "publisher still held"
            await asyncio.sleep(0.1)
        await publisher.close()
        await consumer.close()

    asyncio.run(run())
    assert f"queue '{qname}' in vhost '/' stalled" in fresh_roost.log


def test_graceful_shutdown_closes_a_held_publisher(fresh_roost: RoostProcess, qname: str) -> None:
    """A paused socket must still read the client's close-ok: shutdown does not hang."""
    declare(fresh_roost, qname)

    async def run() -> Peer:
        consumer = await connect(fresh_roost)
        pending: list[int] = []
        consumer.on_deliver = pending.append
        await consumer.consume(qname, prefetch=10)
        publisher = await connect(fresh_roost)
        publisher.publish_many(qname, 100_000)
        await until(lambda: "stalled" in fresh_roost.log or len(pending) >= 10, 10)
        started = time.monotonic()
        code = await asyncio.to_thread(fresh_roost.stop)
        assert code == 0
        assert time.monotonic() - started < 10
        await until(lambda: publisher.conn.closed.done(), 5)
        consumer.transport.abort() if consumer.transport else None
        return publisher

    publisher = asyncio.run(run())
    assert isinstance(publisher.conn.error, ConnectionClosed)
    assert publisher.conn.error.reply_code == 320
