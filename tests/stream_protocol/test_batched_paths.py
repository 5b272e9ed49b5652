"""The stream protocol's batched paths, on the session with a fake transport and an
in-memory broker: a Publish frame is ONE core publish (deduplicated as the stream does
for batches, one confirm for its ids), and a subscription gets the stream queue's runs
of stored records as Deliver chunks, each message exactly as a stream client sent it,
split at the connection's frame size with one chunk per credit; and AMQP 0-9-1 and
STOMP consumers of the stream (a real Roost) read each message of a batched publish."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pika
from rstream import AMQPMessage, RawMessage
from rstream import Producer as RProducer
from rstream import Properties as AmqpProperties

from roost.stream_protocol import constants as c
from roost.stream_protocol.amqp10 import decode_message, encode_data, encode_message
from roost.stream_protocol.chunks import ChunkHeader, chunk_records
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    Credit,
    DeclarePublisher,
    Deliver,
    OffsetSpec,
    Publish,
    PublishConfirm,
    PublishedMessage,
    QueryPublisherSequence,
    QueryPublisherSequenceResponse,
    Subscribe,
)
from roost.stream_protocol.session import StreamSession
from tests.fake_clock import FakeClock
from tests.stream_protocol.sessions import _stomp_read, opened
from tests.support import RoostProcess


def publish(session: StreamSession, clock: FakeClock, ids: list[int], data: list[bytes]) -> None:
    messages = [PublishedMessage(i, d) for i, d in zip(ids, data, strict=True)]
    session.data_received(encode(Publish(1, messages)))
    clock.advance(0)


def test_a_publish_frame_is_one_core_publish_deduplicated_as_a_batch() -> None:
    session, transport, clock, publishes = opened()
    session.data_received(encode(DeclarePublisher(6, 1, "ref", "s")))
    publish(session, clock, [1, 2, 3, 4, 5], [b"m%d" % i for i in range(1, 6)])
    assert len(publishes) == 1
    assert PublishConfirm(1, [1, 2, 3, 4, 5]) in transport.frames()
    # a resend of 4 and 5 with two new ones: one publish, all four confirmed, two stored
    publish(session, clock, [4, 5, 6, 7], [b"m4", b"m5", b"m6", b"m7"])
    assert len(publishes) == 2
    assert PublishConfirm(1, [4, 5, 6, 7]) in transport.frames()
    session.data_received(encode(QueryPublisherSequence(8, "ref", "s")))
    session.data_received(encode(Subscribe(9, 1, "s", OffsetSpec(c.OFFSET_FIRST), 10)))
    clock.advance(0)
    frames = transport.frames()
    assert QueryPublisherSequenceResponse(8, c.OK, 7) in frames
    records = [r for f in frames if isinstance(f, Deliver) for r in chunk_records(f.chunk)]
    assert records == [b"m1", b"m2", b"m3", b"m4", b"m5", b"m6", b"m7"]


def test_a_frame_whose_ids_have_gaps_is_published_message_by_message() -> None:
    session, transport, clock, publishes = opened()
    session.data_received(encode(DeclarePublisher(6, 1, "ref", "s")))
    publish(session, clock, [1, 3, 5], [b"a", b"b", b"c"])
    assert len(publishes) == 3
    frames = transport.frames()
    confirmed = [i for f in frames if isinstance(f, PublishConfirm) for i in f.publishing_ids]
    assert confirmed == [1, 3, 5]


def test_each_message_is_delivered_as_sent_and_chunks_split_at_the_frame_size() -> None:
    session, transport, clock, _ = opened(frame_max=4096)
    session.data_received(encode(DeclarePublisher(6, 1, "", "s")))
    detailed = encode_message(b"body", {"message_id": "id-1"}, {"k": "v", "n": 7})
    first = [encode_data(b"plain"), b"raw bytes, not AMQP 1.0", detailed]
    many = [encode_data(bytes([i]) * 300) for i in range(40)]  # 40 x ~310 B: > 4 KiB
    publish(session, clock, list(range(3)), first)
    for start in range(0, 40, 10):  # frames within 4 KiB
        publish(session, clock, list(range(3 + start, 13 + start)), many[start : start + 10])
    session.data_received(encode(Subscribe(7, 1, "s", OffsetSpec(c.OFFSET_FIRST), 1)))
    clock.advance(0)
    delivers = [f for f in transport.frames() if isinstance(f, Deliver)]
    assert len(delivers) == 1  # one credit, one chunk
    session.data_received(encode(Credit(1, 100)))
    clock.advance(0)
    delivers += [f for f in transport.frames() if isinstance(f, Deliver)]
    assert len(delivers) > 2
    records: list[bytes] = []
    for deliver in delivers:
        header = ChunkHeader.unpack(deliver.chunk)
        assert header.chunk_id == len(records)  # consecutive offsets, chunk by chunk
        assert len(deliver.chunk) <= 4096
        records += chunk_records(deliver.chunk)
    assert records[:2] == first[:2]
    message = decode_message(records[2])
    assert message is not None
    assert (message.body, message.properties, message.application_properties) == (
        b"body", {"message_id": "id-1"}, {"k": "v", "n": 7}
    )
    assert records[3:] == many


def test_amqp_and_stomp_consumers_read_each_message_of_a_batched_publish(
    roost: RoostProcess, qname: str
) -> None:
    """A Publish frame is stored as one record per message: an AMQP 0-9-1 and a STOMP
    consumer of the stream read each message with its body, properties and offset."""

    async def publish() -> None:
        async with RProducer(
            "127.0.0.1", roost.stream_port, username="guest", password="guest"
        ) as producer:
            await producer.create_stream(qname)
            await producer.send_batch(  # one frame; no waiting between the three
                qname,
                [
                    AMQPMessage(body=b"plain"),
                    AMQPMessage(
                        body=b"detailed",
                        properties=AmqpProperties(content_type="text/plain", message_id="m-2"),
                        application_properties={"k": "v"},
                    ),
                    RawMessage(b"raw"),
                ],
            )
            await producer.send_wait(qname, AMQPMessage(body=b"last"))

    asyncio.run(publish())
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=10)
        got: list[tuple[Any, bytes]] = []
        ch.basic_consume(
            qname,
            lambda ch_, m, p, body: got.append((p, body)),
            arguments={"x-stream-offset": "first"},
        )
        deadline = time.monotonic() + 10
        while len(got) < 4 and time.monotonic() < deadline:
            conn.process_data_events(0.05)
    assert [body for _, body in got] == [b"plain", b"detailed", b"raw", b"last"]
    assert [p.headers["x-stream-offset"] for p, _ in got] == [0, 1, 2, 3]
    detailed = got[1][0]
    assert (detailed.content_type, detailed.message_id) == ("text/plain", "m-2")
    assert detailed.headers["k"] == "v"
    stomp_bodies = _stomp_read(roost, qname, 4)
    assert stomp_bodies == ["plain", "detailed", "raw", "last"]


