"""Stream-protocol clients of a test server: rstream producers and consumers, and a raw client
for frames real clients never send."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rstream import Consumer as RConsumer
from rstream import (
    ConsumerOffsetSpecification,
)
from rstream import Producer as RProducer

from roost.stream_protocol import constants as c
from roost.stream_protocol.codec import FrameReader, encode
from roost.stream_protocol.frames import PeerProperties
from tests.support import RoostProcess

Got = list[tuple[int, bytes]]


def _run(coro: Awaitable[Any], timeout: float = 30) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


def _producer(roost: RoostProcess, **kw: Any) -> RProducer:
    return RProducer("127.0.0.1", roost.stream_port, username="guest", password="guest", **kw)


def _consumer(roost: RoostProcess) -> RConsumer:
    return RConsumer("127.0.0.1", roost.stream_port, username="guest", password="guest")


async def _until(cond: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _read(
    roost: RoostProcess, stream: str, spec: ConsumerOffsetSpecification, count: int, **kw: Any
) -> Got:
    """Subscribe, wait for ``count`` messages, and return (offset, raw bytes) pairs."""
    got: Got = []
    async with _consumer(roost) as consumer:
        await consumer.subscribe(
            stream, lambda m, ctx: got.append((ctx.offset, m)), offset_specification=spec, **kw
        )
        await _until(lambda: len(got) >= count, f"{count} messages from {stream}")
        await asyncio.sleep(0.05)  # nothing more arrives than asked for
    return got


class _RawClient:
    """The codec's frames over a plain socket: for what clients never send."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.frames = FrameReader(role="client")
        self.buffered: list[Any] = []

    async def send(self, frame: Any) -> None:
        self.writer.write(encode(frame))
        await self.writer.drain()

    async def next(self, timeout: float = 5) -> Any:
        while True:
            self.buffered.extend(self.frames.frames())
            if self.buffered:
                return self.buffered.pop(0)
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                return None
            self.frames.feed(data)

    async def subscribe_and_count(self, stream: str, credit: int) -> tuple[int, int]:
        from roost.stream_protocol.chunks import chunk_records
        from roost.stream_protocol.frames import Deliver, OffsetSpec, Subscribe

        await self.send(Subscribe(9, 1, stream, OffsetSpec(c.OFFSET_FIRST), credit))
        chunks = records = 0
        buffered: list[Any] = self.buffered
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                data = await asyncio.wait_for(self.reader.read(65536), 0.2)
            except TimeoutError:
                continue
            self.frames.feed(data)
            buffered.extend(self.frames.frames())
        for frame in buffered:
            if isinstance(frame, Deliver):
                chunks += 1
                records += len(chunk_records(frame.chunk))
        return chunks, records

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError):
            await self.writer.wait_closed()


async def _raw_session(port: int) -> _RawClient:
    from roost.stream_protocol.frames import Open, SaslAuthenticate, SaslHandshake, Tune

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    raw = _RawClient(reader, writer)
    await raw.send(PeerProperties(1, {}))
    await raw.send(SaslHandshake(2))
    await raw.send(SaslAuthenticate(3, "PLAIN", b"\x00guest\x00guest"))
    seen: list[Any] = []
    while not any(isinstance(f, Tune) for f in seen):
        frame = await raw.next()
        assert frame is not None
        seen.append(frame)
    await raw.send(Tune(1_048_576, 0, response=True))
    await raw.send(Open(4, "/"))
    while True:
        frame = await raw.next()
        if type(frame).__name__ == "OpenResponse":
            assert frame.response_code == c.OK
            return raw
