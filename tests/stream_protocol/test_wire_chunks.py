"""Chunks stored in the wire format (store/stream_chunk.py): a Publish frame whose messages
are data sections or plain bytes is ONE chunk record on disk, and a subscription gets it
as a Deliver head plus the stored bytes; a subscription starting inside it, or with a
frame size too small for it, gets exactly its messages; filters treat its messages as
unfiltered. AMQP 0-9-1 (per message and chunked, as the Spark source reads), STOMP and
rstream consumers of a real Roost read each message with its own offset."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
from rstream import AMQPMessage, ConsumerOffsetSpecification, OffsetType, RawMessage
from rstream import Consumer as RConsumer
from rstream import Producer as RProducer

from roost.pipeline.chunks import records
from roost.store.stream_store import StreamFiles
from roost.stream_protocol import constants as c
from roost.stream_protocol.chunks import ChunkHeader, chunk_records
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    Credit,
    DeclarePublisher,
    OffsetSpec,
    Publish,
    PublishConfirm,
    PublishedMessage,
)
from tests.brokers import memory_broker
from tests.stream_protocol.sessions import (
    _SESSIONS,
    _stomp_read,
    delivered,
    session_on,
)
from tests.support import RoostProcess

# a data section written with a 32-bit length although short: a chunk rebuilt from the
# message would use the 8-bit form, so only the stored bytes give this back
LONG_FORM = b"\x00Su\xb0" + struct.pack(">I", 3) + b"abc"


@pytest.fixture(autouse=True)
def _close_sessions() -> Iterator[None]:
    """Sessions end as a dropped connection does: their readers close their files."""
    yield
    while _SESSIONS:
        _SESSIONS.pop().connection_lost()


def published(tmp_path: Path, messages: list[bytes]) -> Any:
    port = memory_broker(stream_storage=StreamFiles(tmp_path))
    session, transport, clock = session_on(port, 1 << 20, create=True)
    session.data_received(encode(DeclarePublisher(6, 1, "ref", "s")))
    session.data_received(
        encode(Publish(1, [PublishedMessage(i, m) for i, m in enumerate(messages, 1)]))
    )
    clock.advance(0)
    assert PublishConfirm(1, list(range(1, len(messages) + 1))) in transport.frames()
    return port


def test_a_publish_frame_is_one_stored_chunk_delivered_as_stored(tmp_path: Path) -> None:
    messages = [LONG_FORM, b"raw", *(b"\x00Su\xa0\x02m%d" % i for i in range(3))]
    port = published(tmp_path, messages)
    segment = next(tmp_path.glob("vhosts/*/streams/*/*.seg")).read_bytes()
    session, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(session, transport, clock, OffsetSpec(c.OFFSET_FIRST))
    assert len(delivers) == 1
    assert delivers[0].chunk in segment  # the stored bytes, header and all
    assert chunk_records(delivers[0].chunk) == messages
    assert ChunkHeader.unpack(delivers[0].chunk).chunk_id == 0


def test_messages_with_properties_are_one_chunk_kept_byte_for_byte(tmp_path: Path) -> None:
    """What rstream's super-stream producer sends (application properties per message,
    properties, a header section Roost's own mapping drops): one chunk record, read back
    as sent; before, each message was mapped on publishing and encoded again on every
    delivery (0.2x RabbitMQ's super-stream consume)."""
    header = b"\x00Sp\xc0\x02\x01\x41"  # header section: durable true
    messages = [
        header + b"\x00St\xc1\x09\x02\xa1\x01k\x71\x00\x00\x00\x07" + b"\x00Su\xa0\x01a",
        b"\x00Ss\xc0\x06\x01\xa1\x03m-1" + b"\x00Su\xa0\x01b",  # message-id m-1
        b"\x00Su\xa0\x01c",
    ]
    port = published(tmp_path, messages)
    segment = next(tmp_path.glob("vhosts/*/streams/*/*.seg")).read_bytes()
    session, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(session, transport, clock, OffsetSpec(c.OFFSET_FIRST))
    assert len(delivers) == 1
    assert delivers[0].chunk in segment
    assert chunk_records(delivers[0].chunk) == messages


def test_a_stored_chunk_is_written_as_a_view_of_the_bytes_read_not_a_copy(
    tmp_path: Path,
) -> None:
    """The Deliver of a whole stored chunk is its 9-byte head and a memoryview of the
    run the store read: the plumbing hands that view to the socket (writev), so the
    chunk's bytes are not copied in user space."""
    messages = [b"\x00Su\xa0\x02m%d" % i for i in range(3)]
    port = published(tmp_path, messages)
    session, transport, clock = session_on(port, 1 << 20, create=False)
    writes: list[bytes | memoryview] = []
    feed = transport.write

    def record(data: bytes | memoryview) -> None:
        writes.append(data)
        feed(data)

    transport.write = record  # type: ignore[method-assign]
    delivers = delivered(session, transport, clock, OffsetSpec(c.OFFSET_FIRST))
    assert len(delivers) == 1
    views = [w for w in writes if isinstance(w, memoryview)]
    assert len(views) == 1 and bytes(views[0]) == delivers[0].chunk
    assert isinstance(views[0].obj, bytes) and len(views[0].obj) > len(views[0])


def test_inside_a_chunk_or_past_the_frame_size_exactly_the_messages_go(tmp_path: Path) -> None:
    messages = [b"\x00Su\xa0\xff" + bytes([i]) * 255 for i in range(40)]  # ~10 KiB
    port = published(tmp_path, messages)
    # from offset 37: a chunk from 37 on, not the stored one
    session, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(session, transport, clock, OffsetSpec(c.OFFSET_OFFSET, 37))
    assert [ChunkHeader.unpack(d.chunk).chunk_id for d in delivers] == [37]
    assert chunk_records(delivers[0].chunk) == messages[37:]
    # a 4 KiB frame size: the chunk is split into frames that fit, offsets consecutive
    session, transport, clock = session_on(port, 4096, create=False)
    delivers = delivered(session, transport, clock, OffsetSpec(c.OFFSET_FIRST))
    session.data_received(encode(Credit(1, 100)))
    clock.advance(0)
    assert len(delivers) > 2 and all(len(d.chunk) <= 4096 for d in delivers)
    got: list[bytes] = []
    for deliver in delivers:
        assert ChunkHeader.unpack(deliver.chunk).chunk_id == len(got)
        got += chunk_records(deliver.chunk)
    assert got == messages


def test_a_filtering_subscription_treats_chunk_messages_as_unfiltered(tmp_path: Path) -> None:
    port = published(tmp_path, [b"\x00Su\xa0\x01a", b"\x00Su\xa0\x01b"])
    session, transport, clock = session_on(port, 1 << 20, create=False)
    only = {"filter.0": "eu"}
    assert delivered(session, transport, clock, OffsetSpec(c.OFFSET_FIRST), properties=only) == []
    session, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(session, transport, clock, OffsetSpec(c.OFFSET_FIRST),
                         properties={**only, "match-unfiltered": "true"})
    assert [r for d in delivers for r in chunk_records(d.chunk)] == [b"\x00Su\xa0\x01a",
                                                                     b"\x00Su\xa0\x01b"]


def test_every_protocol_reads_each_message_of_a_stored_chunk(
    roost: RoostProcess, qname: str
) -> None:
    got: list[tuple[int, bytes]] = []

    async def scenario() -> None:
        async with RProducer(
            "127.0.0.1", roost.stream_port, username="guest", password="guest"
        ) as producer:
            await producer.create_stream(qname)
            stored = asyncio.Event()
            confirms: list[int] = []

            def on_confirm(status: Any) -> None:
                confirms.append(status.message_id)
                if len(confirms) == 3:
                    stored.set()

            await producer.send_batch(
                qname, [AMQPMessage(body=b"a"), RawMessage(b"b"), AMQPMessage(body=b"c")],
                on_publish_confirm=on_confirm,
            )
            # the broker merges what arrives in one loop turn into one chunk; two chunks
            # are wanted here, so the second batch goes only after the first is stored
            await asyncio.wait_for(stored.wait(), 10)
            await producer.send_batch(qname, [AMQPMessage(body=b"d"), AMQPMessage(body=b"e")])
        consumer = RConsumer("127.0.0.1", roost.stream_port, username="guest",
                             password="guest")
        await consumer.start()
        try:
            await consumer.subscribe(
                qname, lambda msg, ctx: got.append((ctx.offset, bytes(msg))),
                offset_specification=ConsumerOffsetSpecification(OffsetType.OFFSET, 1),
            )
            deadline = time.monotonic() + 10
            while len(got) < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        finally:
            await consumer.close()

    asyncio.run(scenario())
    # rstream, from inside a chunk: each message as it was sent
    assert got == [(1, b"b"), (2, b"\x00Su\xa0\x01c"), (3, b"\x00Su\xa0\x01d"),
                   (4, b"\x00Su\xa0\x01e")]
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=10)
        plain: list[tuple[Any, bytes]] = []
        ch.basic_consume(qname, lambda ch_, m, p, body: plain.append((p, body)),
                         arguments={"x-stream-offset": 2})
        last: list[tuple[Any, bytes]] = []  # RabbitMQ 3.10: the whole last chunk
        ch.basic_consume(qname, lambda ch_, m, p, body: last.append((p, body)),
                         arguments={"x-stream-offset": "last"})
        chunked: list[tuple[int, bytes]] = []
        ch.basic_consume(  # the Spark source's chunked read
            qname,
            lambda ch_, m, p, body: chunked.extend((r[0], r[5]) for r in records(body)),
            arguments={"x-stream-offset": 1, "x-roost-chunk-bytes": 65536},
        )
        deadline = time.monotonic() + 10
        while (len(plain) < 3 or len(chunked) < 4 or len(last) < 2) and (
            time.monotonic() < deadline
        ):
            conn.process_data_events(0.05)
    assert [(p.headers["x-stream-offset"], b) for p, b in plain] == [(2, b"c"), (3, b"d"),
                                                                      (4, b"e")]
    assert plain[0][0].delivery_mode == 2
    assert [(p.headers["x-stream-offset"], b) for p, b in last] == [(3, b"d"), (4, b"e")]
    assert chunked == [(1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    assert _stomp_read(roost, qname, 5) == ["a", "b", "c", "d", "e"]
