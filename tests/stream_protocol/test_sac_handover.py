"""Single active consumer hand-over on a super stream's partition, as RabbitMQ does it:
the member stepping down is told ConsumerUpdate (not active) and the next member is made
active only when that answer comes (or after the step-down timeout), so it can resume
from the offset the previous one stored and no message is read twice."""

from __future__ import annotations

from typing import Any

from roost.stream_protocol import constants as c
from roost.stream_protocol import single_active
from roost.stream_protocol.chunks import chunk_records
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    ConsumerUpdate,
    ConsumerUpdateResponse,
    CreateSuperStream,
    DeclarePublisher,
    Deliver,
    OffsetSpec,
    Publish,
    PublishedMessage,
    QueryOffset,
    QueryOffsetResponse,
    StoreOffset,
    Subscribe,
)
from tests.brokers import memory_broker
from tests.stream_protocol.sessions import session_on

SAC = {"single-active-consumer": "true", "name": "g", "super-stream": "ss"}


def _send(peer: tuple[Any, Any, Any], *frames: Any) -> list[Any]:
    """Frames in, then what the server wrote to that connection since last asked."""
    session, transport, clock = peer
    for frame in frames:
        session.data_received(encode(frame))
    clock.advance(0)
    return list(transport.frames())


def _updates(frames: list[Any]) -> list[ConsumerUpdate]:
    return [f for f in frames if isinstance(f, ConsumerUpdate)]


def _read(frames: list[Any]) -> list[bytes]:
    return [m for f in frames if isinstance(f, Deliver) for m in chunk_records(f.chunk)]


def test_the_next_member_waits_for_the_stepping_down_one_s_answer() -> None:
    port = memory_broker()
    a = session_on(port, 1 << 20, create=False)
    _send(a, CreateSuperStream(7, "ss", ["ss-0", "ss-1"], ["0", "1"]),
          DeclarePublisher(6, 1, "", "ss-1"),
          Publish(1, [PublishedMessage(i, b"m%d" % i) for i in range(3)]))
    # alone, A reads partition 1 (1 mod 1 = 0) from where its answer says
    (update,) = _updates(_send(a, Subscribe(9, 1, "ss-1", OffsetSpec.first(), 10, SAC)))
    assert update.active
    got = _send(a, ConsumerUpdateResponse(update.correlation_id, c.OK, OffsetSpec.none()))
    assert _read(got) == [b"m0", b"m1", b"m2"]

    # B joins: partition 1 moves to it (1 mod 2 = 1); A is told first, B waits
    b = session_on(port, 1 << 20, create=False)
    assert _updates(_send(b, Subscribe(9, 1, "ss-1", OffsetSpec.first(), 10, SAC))) == []
    (down,) = _updates(_send(a))
    assert not down.active
    _send(a, Publish(1, [PublishedMessage(3, b"m3")]))  # while nobody is active
    assert _updates(_send(b)) == [] and _read(_send(b)) == []
    # A stores how far it got, then answers: only now is B made active
    _send(a, StoreOffset("g", "ss-1", 2),
          ConsumerUpdateResponse(down.correlation_id, c.OK, OffsetSpec.none()))
    (up,) = _updates(_send(b))
    assert up.active
    (stored,) = _send(b, QueryOffset(3, "g", "ss-1"))
    assert stored == QueryOffsetResponse(3, c.OK, 2)
    got = _send(b, ConsumerUpdateResponse(up.correlation_id, c.OK,
                                          OffsetSpec(c.OFFSET_OFFSET, stored.offset + 1)))
    assert _read(got) == [b"m3"]  # nothing of A's read again
    assert _read(_send(a)) == []


def test_a_member_that_never_answers_is_waited_for_until_the_timeout() -> None:
    port = memory_broker()
    a = session_on(port, 1 << 20, create=False)
    _send(a, CreateSuperStream(7, "ss", ["ss-0", "ss-1"], ["0", "1"]))
    (update,) = _updates(_send(a, Subscribe(9, 1, "ss-1", OffsetSpec.first(), 10, SAC)))
    _send(a, ConsumerUpdateResponse(update.correlation_id, c.OK, OffsetSpec.none()))
    b = session_on(port, 1 << 20, create=False)
    _send(b, Subscribe(9, 1, "ss-1", OffsetSpec.first(), 10, SAC))
    (down,) = _updates(_send(a))
    assert not down.active
    a[2].advance(single_active.STEP_DOWN_TIMEOUT - 1)
    assert _updates(_send(b)) == []
    a[2].advance(1)  # the wait ends without an answer: B is made active
    (up,) = _updates(_send(b))
    assert up.active
    # a late answer changes nothing
    _send(a, ConsumerUpdateResponse(down.correlation_id, c.OK, OffsetSpec.none()))
    assert _updates(_send(b)) == [] and _updates(_send(a)) == []


def test_a_member_leaving_while_stepping_down_ends_the_wait() -> None:
    port = memory_broker()
    a = session_on(port, 1 << 20, create=False)
    _send(a, CreateSuperStream(7, "ss", ["ss-0", "ss-1"], ["0", "1"]))
    (update,) = _updates(_send(a, Subscribe(9, 1, "ss-1", OffsetSpec.first(), 10, SAC)))
    _send(a, ConsumerUpdateResponse(update.correlation_id, c.OK, OffsetSpec.none()))
    b = session_on(port, 1 << 20, create=False)
    _send(b, Subscribe(9, 1, "ss-1", OffsetSpec.first(), 10, SAC))
    assert [u.active for u in _updates(_send(a))] == [False]
    a[0].connection_lost()  # A's connection drops before it answers
    (up,) = _updates(_send(b))
    assert up.active
