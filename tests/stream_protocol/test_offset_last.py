"""Subscribe with offset specification ``last`` starts at the first message of the last
chunk, as RabbitMQ's stream plugin does ("last" = the last chunk): a Publish frame is one
chunk record, so a subscriber gets that frame's messages whole, with its chunk id."""

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
    ResolveOffsetSpec,
    ResolveOffsetSpecResponse,
)
from tests.brokers import memory_broker
from tests.stream_protocol.sessions import delivered, session_on


def test_last_starts_at_the_first_message_of_the_last_chunk(tmp_path: Path) -> None:
    port = memory_broker(stream_storage=StreamFiles(tmp_path))
    session, transport, clock = session_on(port, 1 << 20, create=True)
    session.data_received(encode(DeclarePublisher(6, 1, "", "s")))
    frames = [[b"f%dm%d" % (f, i) for i in range(5)] for f in range(3)]
    for f, messages in enumerate(frames):  # offsets 0-4, 5-9, 10-14: three chunk records
        ids = list(range(f * 5, f * 5 + 5))
        session.data_received(
            encode(Publish(1, [PublishedMessage(i, m) for i, m in zip(ids, messages, strict=True)]))
        )
        clock.advance(0)
        assert PublishConfirm(1, ids) in transport.frames()

    reader, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(reader, transport, clock, OffsetSpec(c.OFFSET_LAST))
    assert [ChunkHeader.unpack(d.chunk).chunk_id for d in delivers] == [10]
    assert chunk_records(delivers[0].chunk) == frames[2]
    # ResolveOffsetSpec(last) answers where that Subscribe starts (the store's last chunk)
    reader.data_received(encode(ResolveOffsetSpec(7, "s", OffsetSpec(c.OFFSET_LAST))))
    clock.advance(0)
    assert ResolveOffsetSpecResponse(7, c.OK, c.OFFSET_OFFSET, 10) in transport.frames()

    # a single-message frame is stored as one record: the last chunk is that message
    session.data_received(encode(Publish(1, [PublishedMessage(15, b"alone")])))
    clock.advance(0)
    reader, transport, clock = session_on(port, 1 << 20, create=False)
    delivers = delivered(reader, transport, clock, OffsetSpec(c.OFFSET_LAST))
    assert [ChunkHeader.unpack(d.chunk).chunk_id for d in delivers] == [15]
    assert chunk_records(delivers[0].chunk) == [b"alone"]
