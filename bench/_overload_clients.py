"""The load of ``overload_bench.py``: producers that never wait and a consumer, each in
a process of its own, counting into shared counters the parent samples.

A producer writes ``batch`` frames per write (STOMP ``SEND``s without receipts, or AMQP
``basic.publish``es) and waits only for TCP: ``drain()`` over TCP, ``send_bytes`` over
WebSocket, the transport's ``pause_writing`` for AMQP. That is a fire-and-forget client
as most are written; a broker that reads faster than its consumers take lets the queue
grow, one that holds the publisher makes this loop wait in ``drain``. With
``receipt_every`` the producer asks for a RECEIPT every N SENDs and waits for it before
it sends the next N (a windowed producer).

The STOMP consumer subscribes with ``ack`` (``client-individual`` acks every message on
its own, ``auto`` none) and ``prefetch-count``; it acks all the messages of one read
in one write. The AMQP consumer is auto-ack.

The MQTT (3.1.1, Roost's codec via ``_mqtt_raw``) producer writes ``batch`` QoS 0
PUBLISHes per write; the consumer holds a QoS 1 subscription to the same topic and
PUBACKs the QoS 1 deliveries of one read in one write (a QoS 0 publish reaches it at
QoS 0, the lower of the two, so in the bench's shape it has nothing to acknowledge).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from _mqtt_raw import LEVEL, READ, RawClient  # a sibling module

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client import Connection, connect
from roost.client.aio import new_event_loop
from roost.mqtt.codec import encode
from roost.mqtt.packets import PubAck, Publish
from roost.stomp.frame_encoding import serialize
from roost.stomp.frames import NEED_DATA, Frame, FrameParser


def _run(coro: Any) -> None:
    loop = new_event_loop()
    try:
        loop.run_until_complete(coro)
    finally:
        loop.close()


class Stomp:
    """One STOMP 1.2 connection over TCP or WebSocket (``/ws``, both brokers' path)."""

    def __init__(self) -> None:
        self.parser = FrameParser()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._session: Any = None
        self._ws: Any = None

    @classmethod
    async def open(cls, transport: str, port: int) -> Stomp:
        conn = cls()
        if transport == "tcp":
            conn._reader, conn._writer = await asyncio.open_connection("127.0.0.1", port)
        else:
            import aiohttp

            conn._session = aiohttp.ClientSession()
            conn._ws = await conn._session.ws_connect(
                f"ws://127.0.0.1:{port}/ws", protocols=("v12.stomp",), max_msg_size=0
            )
        await conn.send(serialize("CONNECT", {
            "accept-version": "1.2", "login": "guest", "passcode": "guest", "host": "/",
            "heart-beat": "0,0",
        }))
        frame = await conn.next_frame()
        assert frame.command == "CONNECTED", frame
        return conn

    async def send(self, data: bytes) -> None:
        """Write and wait only while the socket pushes back."""
        if self._ws is not None:
            await self._ws.send_bytes(data)
            return
        assert self._writer is not None
        self._writer.write(data)
        await self._writer.drain()

    async def recv(self) -> bytes:
        if self._ws is not None:
            msg = await self._ws.receive()
            if msg.data is None or isinstance(msg.data, Exception):
                raise ConnectionError(f"WebSocket closed: {msg.type}")
            return msg.data.encode() if isinstance(msg.data, str) else bytes(msg.data)
        assert self._reader is not None
        data = await self._reader.read(262144)
        if not data:
            raise ConnectionError("closed")
        return data

    async def next_frame(self) -> Frame:
        while True:
            frame = self.parser.next_frame()
            if frame is not NEED_DATA:
                assert isinstance(frame, Frame)
                return frame
            self.parser.feed(await self.recv())

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            if self._ws is not None:
                await self._ws.close()
                await self._session.close()
            elif self._writer is not None:
                self._writer.transport.abort()


async def _stomp_produce(
    transport: str, port: int, destination: str, size: int, batch: int,
    receipt_every: int, counter: Any, stop: Any,
) -> None:
    conn = await Stomp.open(transport, port)
    frame = serialize("SEND", {"destination": destination}, b"x" * size)
    data = frame * batch
    sent = 0
    while not stop.is_set():
        if receipt_every:
            sent += 1
            await conn.send(frame * (receipt_every - 1) + serialize(
                "SEND", {"destination": destination, "receipt": str(sent)}, b"x" * size))
            while (await conn.next_frame()).command != "RECEIPT":
                pass
            counter.value += receipt_every
        else:
            await conn.send(data)
            counter.value += batch
    await conn.close()


def stomp_producer(
    transport: str, port: int, destination: str, size: int, batch: int,
    receipt_every: int, counter: Any, stop: Any,
) -> None:
    _run(_stomp_produce(transport, port, destination, size, batch, receipt_every, counter,
                        stop))


async def _stomp_consume(
    transport: str, port: int, destination: str, ack: str, prefetch: int,
    counter: Any, ready: Any, stop: Any,
) -> None:
    conn = await Stomp.open(transport, port)
    await conn.send(serialize("SUBSCRIBE", {
        "id": "s", "destination": destination, "ack": ack,
        "prefetch-count": str(prefetch), "receipt": "subscribed",
    }))
    assert (await conn.next_frame()).command == "RECEIPT"
    ready.set()
    parser = conn.parser
    acks = ack != "auto"
    while not stop.is_set():
        parser.feed(await conn.recv())
        out: list[bytes] = []
        got = 0
        while (frame := parser.next_frame()) is not NEED_DATA:
            assert isinstance(frame, Frame)
            if frame.command != "MESSAGE":
                raise RuntimeError(f"unexpected {frame}")
            got += 1
            if acks:
                out.append(b"ACK\nid:" + frame.headers["ack"].encode() + b"\n\n\x00")
        counter.value += got
        if out:
            await conn.send(b"".join(out))
    await conn.close()


def stomp_consumer(
    transport: str, port: int, destination: str, ack: str, prefetch: int,
    counter: Any, ready: Any, stop: Any,
) -> None:
    _run(_stomp_consume(transport, port, destination, ack, prefetch, counter, ready, stop))


# -- AMQP ---------------------------------------------------------------------------------


class _Deliveries(Connection):
    """Counts basic.deliver frames and drops their content; other methods and heartbeats
    go to the usual handling."""

    counter: Any = None

    def frames_received(self, frames: list[Any]) -> None:
        got = 0
        for frame in frames:
            if type(frame) is codec.MethodFrame and frame.method.INDEX == m.BasicDeliver.INDEX:
                got += 1
            elif type(frame) is codec.MethodFrame or type(frame) is codec.HeartbeatFrame:
                self.frame(frame)
        if got:
            self.counter.value += got


async def _amqp_produce(
    url: str, queue: str, size: int, batch: int, counter: Any, stop: Any
) -> None:
    conn = await connect(url)
    ch = await conn.channel()
    one = codec.encode_basic_publish(
        ch.number, "", queue, False, False, b"\x00\x00", b"x" * size, conn.frame_max
    )
    data = one * batch
    while not stop.is_set() and conn.error is None:
        if conn.paused:  # the socket pushes back
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(conn.drain(), 0.05)
            continue
        conn.write(data)
        counter.value += batch
        await asyncio.sleep(0)
    if conn.transport is not None:
        conn.transport.abort()


def amqp_producer(
    url: str, queue: str, size: int, batch: int, counter: Any, stop: Any
) -> None:
    _run(_amqp_produce(url, queue, size, batch, counter, stop))


async def _amqp_consume(url: str, queue: str, counter: Any, ready: Any, stop: Any) -> None:
    _Deliveries.counter = counter
    conn = await connect(url, _Deliveries)
    ch = await conn.channel()
    await ch.queue_declare(queue)
    await ch.consume(queue, lambda _message: None, no_ack=True)  # counted in the frames
    ready.set()
    while not stop.is_set():
        await asyncio.sleep(0.05)
    if conn.transport is not None:
        conn.transport.abort()


def amqp_consumer(url: str, queue: str, counter: Any, ready: Any, stop: Any) -> None:
    _run(_amqp_consume(url, queue, counter, ready, stop))


async def _delete_queue(url: str, queue: str) -> None:
    conn = await connect(url)
    with contextlib.suppress(Exception):
        ch = await conn.channel()
        await asyncio.wait_for(ch.queue_delete(queue), 120)
    if conn.transport is not None:
        conn.transport.abort()


def delete_queue(url: str, queue: str) -> None:
    """Drop what a run left queued (RabbitMQ's backlog would weigh on the next run)."""
    _run(_delete_queue(url, queue))


# -- MQTT ---------------------------------------------------------------------------------


async def _mqtt_produce(
    port: int, topic: str, client_id: str, size: int, batch: int, counter: Any, stop: Any
) -> None:
    # one id per producer process: a second connection with the same id would take over
    conn = await RawClient.connect(port, f"{client_id}-{os.getpid()}")
    data = encode(Publish(topic, b"x" * size), LEVEL) * batch  # QoS 0: nothing comes back
    while not stop.is_set():
        conn.writer.write(data)
        await conn.writer.drain()
        counter.value += batch
    conn.writer.transport.abort()


def mqtt_producer(
    port: int, topic: str, client_id: str, size: int, batch: int, counter: Any, stop: Any
) -> None:
    _run(_mqtt_produce(port, topic, client_id, size, batch, counter, stop))


async def _mqtt_consume(
    port: int, topic: str, client_id: str, counter: Any, ready: Any, stop: Any
) -> None:
    conn = await RawClient.connect(port, client_id)
    await conn.subscribe(topic, 1)
    ready.set()
    while not stop.is_set():
        try:  # a timeout, so an idle subscriber still sees ``stop``
            data = await asyncio.wait_for(conn.reader.read(READ), 0.2)
        except TimeoutError:
            continue
        if not data:
            raise ConnectionError("closed by the broker")
        conn.packets.feed(data)
        got = 0
        acks: list[bytes] = []
        for packet in conn.packets.packets():
            if isinstance(packet, Publish):
                got += 1
                if packet.qos:  # none here: a QoS 0 publish is delivered at QoS 0
                    acks.append(encode(PubAck(packet.packet_id or 0), LEVEL))
        counter.value += got
        if acks:
            conn.writer.write(b"".join(acks))
    conn.writer.transport.abort()


def mqtt_consumer(
    port: int, topic: str, client_id: str, counter: Any, ready: Any, stop: Any
) -> None:
    _run(_mqtt_consume(port, topic, client_id, counter, ready, stop))
