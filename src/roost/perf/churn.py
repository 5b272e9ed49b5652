"""Short-lived connections, as web requests, cron jobs and recycling pools make them:
open, do a little, close (cleanly or not). Used by ``bench/rss_bench.py --churn`` and by
the suite's churn test (tests/integration/test_churn.py).

Each protocol cycles through four ways to end, one connection each:

* AMQP: ``connection.close`` right after the handshake; a channel with an exclusive
  queue, a consumer and two unacked deliveries, then ``connection.close``; the same
  but the socket dropped; the socket dropped in the middle of a frame.
* STOMP over TCP and over WebSocket: ``DISCONNECT`` with a receipt; a ``/topic/``
  subscription (its own queue) with ``ack:client`` and an unacked MESSAGE, then
  ``DISCONNECT``; the same but the socket dropped; the socket dropped in the middle of
  a frame.

``churn`` runs ``count`` connections of each protocol in waves: a wave is opened and
set up, held open a while, then each of its connections ends its way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client import Endpoint, Message, connect

WAYS = 4
STOMP_CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nheart-beat:0,0\n\n\x00"


async def amqp_once(ep: Endpoint, way: int, hold: Callable[[], Awaitable[None]]) -> None:
    """One AMQP connection: set up as ``way`` says, wait for ``hold``, then end."""
    conn = await connect(ep, name="roost-churn")
    transport = conn.transport
    assert transport is not None
    if way in (1, 2):
        ch = await conn.channel()
        ok = await ch.queue_declare("", exclusive=True)
        await ch.qos(10)
        got: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

        def on_message(message: Message) -> None:
            if not got.done():
                got.set_result(message)

        for _ in range(2):
            ch.publish("", ok.queue, b"x" * 100)
        await ch.consume(ok.queue, on_message)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(got, 5)  # a basic.deliver, never acked
    await hold()
    if way == 3:  # a publish cut after its method frame's first bytes
        frame = codec.encode_method_frame(1, m.BasicPublish(exchange="", routing_key="x"))
        transport.write(frame[:9])
        await asyncio.sleep(0.01)
    if way in (2, 3):
        transport.abort()
    else:
        await conn.close()


class _Stomp:
    """A STOMP connection over TCP (asyncio streams) or WebSocket (aiohttp)."""

    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.session: Any = None
        self.ws: Any = None

    async def open(self, transport: str, port: int) -> None:
        if transport == "tcp":
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        else:
            import aiohttp

            self.session = aiohttp.ClientSession()
            self.ws = await self.session.ws_connect(
                f"ws://127.0.0.1:{port}/ws", protocols=("v12.stomp",)
            )
        await self.send(STOMP_CONNECT)
        await self.until(b"CONNECTED")

    async def send(self, data: bytes) -> None:
        if self.ws is not None:
            await self.ws.send_bytes(data)
        else:
            assert self.writer is not None
            self.writer.write(data)
            await self.writer.drain()

    async def until(self, what: bytes) -> None:
        """Read until ``what`` has been seen (in one read: the frames here are small)."""
        while True:
            if self.ws is not None:
                msg = await asyncio.wait_for(self.ws.receive(), 5)
                if not isinstance(msg.data, bytes | str):
                    raise ConnectionError(f"WebSocket {msg.type.name}: {msg.extra}")
                data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
            else:
                assert self.reader is not None
                data = await asyncio.wait_for(self.reader.read(65536), 5)
            if what in data:
                return
            if not data:
                raise ConnectionError("closed")

    async def close(self, *, drop: bool) -> None:
        if self.ws is not None:
            if drop:
                self.ws._response.connection.transport.abort()  # no close frame
            with contextlib.suppress(Exception):
                await self.ws.close()
            await self.session.close()
        elif self.writer is not None:
            if drop:
                self.writer.transport.abort()
            else:
                self.writer.close()


async def stomp_once(
    transport: str, port: int, way: int, n: int, hold: Callable[[], Awaitable[None]]
) -> None:
    """One STOMP connection: set up as ``way`` says, wait for ``hold``, then end."""
    conn = _Stomp()
    await conn.open(transport, port)
    try:
        if way in (1, 2):
            topic = f"/topic/churn.{transport}.{n}"
            await conn.send(
                f"SUBSCRIBE\nid:s\ndestination:{topic}\nack:client\nreceipt:r\n\n\x00"
                f"SEND\ndestination:{topic}\n\nhello\x00".encode()
            )
            await conn.until(b"MESSAGE")  # never acked
        await hold()
        if way == 3:
            await conn.send(b"SEND\ndestination:/queue/churn\ncontent-length:100\n\nxx")
            await asyncio.sleep(0.01)
        elif way != 2:
            await conn.send(b"DISCONNECT\nreceipt:bye\n\n\x00")
            with contextlib.suppress(ConnectionError):  # RabbitMQ's Web-STOMP just closes
                await conn.until(b"RECEIPT")
    finally:
        await conn.close(drop=way in (2, 3))


async def churn(
    ep: Endpoint,
    stomp_port: int,
    ws_port: int,
    count: dict[str, int],
    *,
    wave: int = 500,
    hold: float = 0.5,
) -> None:
    """``count["amqp"]``, ``count["stomp"]`` and ``count["ws"]`` connections, the protocols
    interleaved, in waves of ``wave`` open at once: each wave is held ``hold`` seconds
    once all of it is set up (long enough for the broker's objects to grow old, as a
    pool's or a web server's connections do), then every connection ends its way."""
    jobs: list[Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]] = []
    for i in range(max(count.values(), default=0)):
        way = i % WAYS
        if i < count.get("amqp", 0):
            jobs.append(partial(amqp_once, ep, way))
        if i < count.get("stomp", 0):
            jobs.append(partial(stomp_once, "tcp", stomp_port, way, i))
        if i < count.get("ws", 0):
            jobs.append(partial(stomp_once, "ws", ws_port, way, i))
    for start in range(0, len(jobs), wave):
        batch = jobs[start : start + wave]
        barrier = _Wave(len(batch), hold)
        await asyncio.gather(*(barrier.run(job) for job in batch))


class _Wave:
    """A wave's connections wait until the whole wave is set up (or failed), then
    ``hold`` seconds more."""

    def __init__(self, size: int, hold: float) -> None:
        self.size = size
        self.hold = hold
        self.arrived = 0
        self.go: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def _arrive(self) -> None:
        self.arrived += 1
        if self.arrived == self.size:
            asyncio.get_running_loop().call_later(self.hold, self.go.set_result, None)

    async def run(self, job: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]) -> None:
        arrived = False

        async def held() -> None:
            nonlocal arrived
            arrived = True
            self._arrive()
            await asyncio.shield(self.go)

        try:
            await job(held)
        finally:
            if not arrived:
                self._arrive()  # failed before it was set up: the others need not wait
