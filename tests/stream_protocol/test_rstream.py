"""rstream 1.1 (the Python stream client RabbitMQ points to) against a server made of
the codec: it reads every frame the client sends (publishes single, deduplicated and
sub-batched; subscriptions from every offset specification; credit, offsets,
unsubscribe, close), and the client takes every frame the codec encodes, chunks sent
as a Deliver head plus the chunk's own bytes included."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from rstream import (
    AMQPMessage,
    ConsumerOffsetSpecification,
    OffsetType,
    amqp_decoder,
)
from rstream import Consumer as RConsumer
from rstream import Producer as RProducer

from roost.stream_protocol import constants as c
from roost.stream_protocol.chunks import SubBatchEntry, chunk_records
from roost.stream_protocol.frames import (
    Create,
    Credit,
    DeclarePublisher,
    Metadata,
    Open,
    PeerProperties,
    Publish,
    PublishedBatch,
    PublishedMessage,
    QueryOffset,
    QueryPublisherSequence,
    SaslAuthenticate,
    SaslHandshake,
    StoreOffset,
    Subscribe,
    Tune,
    Unsubscribe,
)
from tests.stream_protocol.stub_server import StubStreamServer

SPECS = {
    "first": ConsumerOffsetSpecification(OffsetType.FIRST, None),
    "last": ConsumerOffsetSpecification(OffsetType.LAST, None),
    "next": ConsumerOffsetSpecification(OffsetType.NEXT, None),
    "offset": ConsumerOffsetSpecification(OffsetType.OFFSET, 2),
    "timestamp": ConsumerOffsetSpecification(OffsetType.TIMESTAMP, 0),
}


async def _until(predicate: Any, what: str) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def _scenario(server: StubStreamServer) -> dict[str, list[tuple[int, bytes]]]:
    got: dict[str, list[tuple[int, bytes]]] = defaultdict(list)
    producer = RProducer("127.0.0.1", server.port, username="guest", password="guest",
                         default_batch_publishing_delay=0.05)
    async with producer:
        await producer.create_stream("s1")
        for i in range(3):
            await producer.send_wait("s1", f"m{i}".encode())  # offsets 0, 1, 2
        await producer.send_wait("s1", AMQPMessage(body=b"amqp-body"))  # 3
        # a deduplicating publisher (a reference) asks for its last publishing id first
        dedup = RProducer("127.0.0.1", server.port, username="guest", password="guest")
        async with dedup:
            await dedup.send_wait("s1", b"dedup", publisher_name="app-producer")  # 4
        confirmed = asyncio.Event()
        await producer.send_sub_entry("s1", [b"s5", b"s6", b"s7"],
                                      on_publish_confirm=lambda _status: confirmed.set())
        await asyncio.wait_for(confirmed.wait(), 10)  # one sub-batch: offsets 5-7

        # one consumer per offset specification (rstream subscribes once per stream)
        consumers = {name: RConsumer("127.0.0.1", server.port, username="guest",
                                     password="guest") for name in SPECS}
        ids = {}
        try:
            for name, spec in SPECS.items():
                def callback(msg: bytes, ctx: Any, name: str = name) -> None:
                    got[name].append((ctx.offset, msg))
                await consumers[name].start()
                ids[name] = await consumers[name].subscribe(
                    "s1", callback, offset_specification=spec, initial_credit=5
                )
            await _until(lambda: len(got["first"]) == 8 and len(got["timestamp"]) == 8
                         and len(got["offset"]) == 6 and len(got["last"]) == 3, "deliveries")
            await producer.send_wait("s1", b"after")  # 8, seen by every subscription
            await _until(lambda: all(got[n][-1:] == [(8, b"after")] for n in SPECS), "offset 8")
            await consumers["first"].store_offset("s1", "app", 8)
            await _until(lambda: any(isinstance(f, StoreOffset) for f in server.received),
                         "the stored offset")
            assert await consumers["first"].query_offset("s1", "app") == 8
            await consumers["last"].unsubscribe(ids["last"])
        finally:
            for consumer in consumers.values():
                await consumer.close()
    return got


def test_rstream_publishes_and_consumes_through_the_codec() -> None:
    server = StubStreamServer()

    async def main() -> dict[str, list[tuple[int, bytes]]]:
        await server.start()
        try:
            return await asyncio.wait_for(_scenario(server), 60)
        finally:
            await server.stop()

    got = asyncio.run(main())
    assert server.errors == []

    records = [b"m0", b"m1", b"m2", None, b"dedup", b"s5", b"s6", b"s7", b"after"]
    first = got["first"]
    assert [offset for offset, _ in first] == list(range(9))
    assert [m for _, m in first if m != first[3][1]] == [r for r in records if r is not None]
    assert amqp_decoder(first[3][1]).body == b"amqp-body"  # AMQP 1.0 bytes pass untouched
    assert got["timestamp"] == first
    assert got["offset"] == first[2:]
    assert got["last"] == first[5:]  # the last chunk: the sub-batch, then the new chunk
    assert got["next"] == first[8:]

    frames = server.received
    kinds = {type(f) for f in frames}
    assert {PeerProperties, SaslHandshake, SaslAuthenticate, Tune, Open, Metadata, Create,
            DeclarePublisher, Publish, QueryPublisherSequence, Subscribe, Credit, StoreOffset,
            QueryOffset, Unsubscribe} <= kinds
    auth = next(f for f in frames if isinstance(f, SaslAuthenticate))
    assert (auth.mechanism, auth.data) == ("PLAIN", b"\x00guest\x00guest")
    declares = [f for f in frames if isinstance(f, DeclarePublisher)]
    assert {d.reference for d in declares} == {"", "app-producer"}
    assert QueryPublisherSequence(
        next(f.correlation_id for f in frames if isinstance(f, QueryPublisherSequence)),
        "app-producer", "s1",
    ) in frames
    messages = [m for f in frames if isinstance(f, Publish) for m in f.messages]
    batch = next(m for m in messages if isinstance(m, PublishedBatch))
    assert batch.entry.records() == [b"s5", b"s6", b"s7"]
    assert isinstance(batch.entry, SubBatchEntry)
    singles = [m.data for m in messages if isinstance(m, PublishedMessage)]
    assert singles[:3] == [b"m0", b"m1", b"m2"]
    specs = {f.offset_spec.type: f for f in frames if isinstance(f, Subscribe)}
    assert set(specs) == {c.OFFSET_FIRST, c.OFFSET_LAST, c.OFFSET_NEXT, c.OFFSET_OFFSET,
                          c.OFFSET_TIMESTAMP}
    assert specs[c.OFFSET_OFFSET].offset_spec.value == 2
    assert specs[c.OFFSET_TIMESTAMP].offset_spec.value == 0
    assert all(f.credit == 5 for f in specs.values())
    assert StoreOffset("app", "s1", 8) in frames
    # what went out: chunks the client accepted (its own CRC check included)
    assert [r for d in server.delivered for r in chunk_records(d.chunk)][:8] == [
        b"m0", b"m1", b"m2", first[3][1], b"dedup", b"s5", b"s6", b"s7"
    ]
