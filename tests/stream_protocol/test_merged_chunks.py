"""Publish frames read in one turn of the loop (one socket read), of one publisher with
ids following on, are stored as ONE chunk, as RabbitMQ's osiris writer makes one chunk
of what waits in its mailbox: a subscriber gets one bigger Deliver. Each message keeps
its offset and publishing id, a resent prefix is still dropped, every id is confirmed,
and a frame of another kind between them keeps its place."""

from __future__ import annotations

from pathlib import Path

from roost.store.stream_store import StreamFiles
from roost.stream_protocol import constants as c
from roost.stream_protocol.chunks import ChunkHeader, chunk_records
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    DeclarePublisher,
    OffsetSpec,
    Publish,
    PublishConfirm,
    PublishedMessage,
    QueryPublisherSequence,
    QueryPublisherSequenceResponse,
)
from tests.brokers import memory_broker
from tests.stream_protocol.sessions import delivered, opened, session_on


def frame(publisher: int, ids: range) -> bytes:
    return encode(Publish(publisher, [PublishedMessage(i, b"m%d" % i) for i in ids]))


def test_frames_read_together_are_one_chunk_with_every_offset_and_id(tmp_path: Path) -> None:
    port = memory_broker(stream_storage=StreamFiles(tmp_path))
    session, transport, clock = session_on(port, 1 << 20, create=True)
    session.data_received(encode(DeclarePublisher(6, 1, "ref", "s")))
    clock.advance(0)
    transport.frames()
    # three frames in one read: one chunk of 9; then a resend of 7-8 with 9-10: one of 2
    session.data_received(frame(1, range(0, 3)) + frame(1, range(3, 6)) + frame(1, range(6, 9)))
    clock.advance(0)
    session.data_received(frame(1, range(7, 9)) + frame(1, range(9, 11)))
    clock.advance(0)
    confirmed = [i for f in transport.frames() if isinstance(f, PublishConfirm)
                 for i in f.publishing_ids]
    assert sorted(confirmed) == sorted([*range(9), 7, 8, 9, 10])

    reader, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(reader, transport, clock, OffsetSpec(c.OFFSET_FIRST))
    assert [ChunkHeader.unpack(d.chunk).chunk_id for d in delivers] == [0, 9]
    assert [chunk_records(d.chunk) for d in delivers] == [
        [b"m%d" % i for i in range(9)], [b"m9", b"m10"]
    ]
    # each message keeps its offset: a subscription from 4 starts at m4
    reader, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(reader, transport, clock, OffsetSpec(c.OFFSET_OFFSET, 4))
    assert ChunkHeader.unpack(delivers[0].chunk).chunk_id == 4
    assert [r for d in delivers for r in chunk_records(d.chunk)] == [
        b"m%d" % i for i in range(4, 11)
    ]


def test_what_cannot_join_is_published_apart_and_in_order() -> None:
    session, transport, clock, publishes = opened()
    session.data_received(
        encode(DeclarePublisher(6, 1, "ref", "s")) + encode(DeclarePublisher(7, 2, "", "s"))
    )
    clock.advance(0)
    session.data_received(
        frame(1, range(0, 2))
        + frame(1, range(5, 7))  # ids not following on: apart
        + encode(QueryPublisherSequence(8, "ref", "s"))  # sees 5-6 stored
        + frame(2, range(0, 2))  # another publisher: apart
        + frame(2, range(9, 11))  # no reference: ids need not follow on, joined
        + frame(1, range(7, 9))
    )
    clock.advance(0)
    assert len(publishes) == 4
    frames = transport.frames()
    assert QueryPublisherSequenceResponse(8, c.OK, 6) in frames
    confirmed = {(f.publisher_id, i) for f in frames if isinstance(f, PublishConfirm)
                 for i in f.publishing_ids}
    assert confirmed == {(1, 0), (1, 1), (1, 5), (1, 6), (1, 7), (1, 8), (2, 0), (2, 1),
                         (2, 9), (2, 10)}
