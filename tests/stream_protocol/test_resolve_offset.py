"""ResolveOffsetSpec (RabbitMQ 3.13's command): the offset a Subscribe with an offset
specification would start at, answered as a specification of type offset; on the
session with an in-memory broker."""

from __future__ import annotations

from roost.stream_protocol import constants as c
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    DeclarePublisher,
    OffsetSpec,
    Publish,
    PublishedMessage,
    ResolveOffsetSpec,
    ResolveOffsetSpecResponse,
)
from roost.stream_protocol.states import VERSIONS
from tests.stream_protocol.sessions import opened


def test_each_offset_specification_resolves_to_where_a_subscription_starts() -> None:
    session, transport, clock, _ = opened()
    session.data_received(
        encode(DeclarePublisher(6, 1, "", "s"))
        + encode(Publish(1, [PublishedMessage(i, b"m") for i in range(5)]))
    )
    clock.advance(0)
    transport.frames()
    specs = [
        OffsetSpec(c.OFFSET_FIRST),
        OffsetSpec(c.OFFSET_LAST),
        OffsetSpec(c.OFFSET_NEXT),
        OffsetSpec(c.OFFSET_OFFSET, 3),
        OffsetSpec(c.OFFSET_TIMESTAMP, 0),
        OffsetSpec(c.OFFSET_TIMESTAMP, 2**62),  # after every message: the next offset
    ]
    for i, spec in enumerate(specs):
        session.data_received(encode(ResolveOffsetSpec(10 + i, "s", spec)))
    session.data_received(encode(ResolveOffsetSpec(20, "missing", OffsetSpec(c.OFFSET_FIRST))))
    clock.advance(0)
    answers = transport.frames()
    ok = [ResolveOffsetSpecResponse(10 + i, c.OK, c.OFFSET_OFFSET, o)
          for i, o in enumerate([0, 0, 5, 3, 0, 5])]  # fmt: skip
    # "last": the first message of the last chunk, the frame's five stored as one
    assert answers[:6] == ok
    assert answers[6].correlation_id == 20
    assert answers[6].response_code == c.STREAM_DOES_NOT_EXIST
    assert any(v.key == c.RESOLVE_OFFSET_SPEC for v in VERSIONS)  # announced
