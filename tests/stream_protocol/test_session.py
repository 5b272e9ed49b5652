"""The stream-protocol session driven without a socket or an event loop: a fake transport,
the fake clock of the STOMP session's tests and an in-memory broker. The state table,
the handshake, heartbeats on the clock's time, a publish confirmed and a subscription
delivered as a chunk, and a pending Create holding the frames behind it."""

from __future__ import annotations

from roost.backpressure import FRAMES_PER_TURN
from roost.stream_protocol import constants as c
from roost.stream_protocol.chunks import chunk_records
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    Close,
    Create,
    DeclarePublisher,
    Deliver,
    Heartbeat,
    Metadata,
    OffsetSpec,
    Open,
    PeerProperties,
    Publish,
    PublishConfirm,
    PublishedMessage,
    Response,
    SaslAuthenticate,
    SaslHandshake,
    StreamStats,
    Subscribe,
    Tune,
)
from roost.stream_protocol.session import StreamSession, StreamSettings
from roost.stream_protocol.states import OPEN, PEER, STATES
from tests.brokers import memory_broker
from tests.fake_clock import FakeClock
from tests.stream_protocol.sessions import FakeTransport


def opened(heartbeat: int = 0) -> tuple[StreamSession, FakeTransport, FakeClock]:
    transport, clock = FakeTransport(), FakeClock()
    session = StreamSession(
        memory_broker(), StreamSettings(heartbeat=heartbeat), transport, clock
    )
    for frame in (
        PeerProperties(1, {}),
        SaslHandshake(2),
        SaslAuthenticate(3, "PLAIN", b"\x00guest\x00guest"),
        Tune(1_048_576, heartbeat, response=True),
        Open(4, "/"),
    ):
        session.data_received(encode(frame))
    assert session.state == OPEN
    transport.frames()  # the handshake's answers
    return session, transport, clock


def test_the_state_table_refuses_commands_before_open() -> None:
    assert Metadata not in STATES[PEER]
    transport, clock = FakeTransport(), FakeClock()
    session = StreamSession(memory_broker(), StreamSettings(), transport, clock)
    session.data_received(encode(Metadata(1, ["s"])))
    [close] = transport.frames()
    assert isinstance(close, Close) and close.code == c.UNKNOWN_FRAME
    assert transport.closed


def test_a_second_open_closes_the_connection_and_registers_nothing() -> None:
    """The handshake happens once: a second Open (as the live fuzzer sent) is refused with
    UNKNOWN_FRAME, and the broker holds one connection, released at the close."""
    session, transport, _clock = opened()
    broker = session.port
    assert len(broker.management.activity.list_connections()) == 1
    session.data_received(encode(Open(5, "/")))
    [close] = transport.frames()
    assert isinstance(close, Close) and close.code == c.UNKNOWN_FRAME
    session.connection_lost()
    assert broker.management.activity.list_connections() == []


def test_heartbeats_go_out_and_two_silent_intervals_close() -> None:
    session, transport, clock = opened(heartbeat=5)
    clock.advance(5)
    assert [type(f) for f in transport.frames()] == [Heartbeat]
    session.data_received(encode(Heartbeat()))
    clock.advance(5)  # the client spoke in this interval: still open
    assert not transport.closed
    clock.advance(5)
    assert not transport.closed  # one silent interval
    clock.advance(5)
    assert transport.closed  # two
    assert "heartbeats" in session.close_reason


def test_a_long_lived_connection_holds_one_heartbeat_timer() -> None:
    session, transport, clock = opened(heartbeat=5)
    for _ in range(50):  # the client answers every interval: the connection lives on
        session.data_received(encode(Heartbeat()))
        clock.advance(5)
    assert not transport.closed
    assert len(session._timers) == 1  # not one per heartbeat sent


def test_publish_is_confirmed_and_a_subscription_gets_one_chunk() -> None:
    session, transport, clock = opened()
    session.data_received(encode(Create(5, "s")))
    clock.advance(0)
    assert transport.frames() == [Response(c.CREATE, 5, c.OK)]
    session.data_received(
        encode(DeclarePublisher(6, 1, "", "s"))
        + encode(Publish(1, [PublishedMessage(i, b"m%d" % i) for i in range(3)]))
    )
    clock.advance(0)
    frames = transport.frames()
    assert frames[0] == Response(c.DECLARE_PUBLISHER, 6, c.OK)
    assert PublishConfirm(1, [0, 1, 2]) in frames
    session.data_received(encode(Subscribe(7, 3, "s", OffsetSpec(c.OFFSET_FIRST), 1)))
    clock.advance(0)
    frames = transport.frames()
    assert frames[0] == Response(c.SUBSCRIBE, 7, c.OK)
    [deliver] = [f for f in frames if isinstance(f, Deliver)]
    assert chunk_records(deliver.chunk) == [b"m0", b"m1", b"m2"]


def test_create_twice_answers_stream_already_exists() -> None:
    session, transport, clock = opened()
    session.data_received(encode(Create(5, "s")) + encode(Create(6, "s")))
    clock.advance(0)
    assert transport.frames() == [
        Response(c.CREATE, 5, c.OK),
        Response(c.CREATE, 6, c.STREAM_ALREADY_EXISTS),
    ]


def test_stream_stats_and_metadata() -> None:
    session, transport, clock = opened()
    session.data_received(
        encode(Create(5, "s"))
        + encode(StreamStats(6, "s"))
        + encode(DeclarePublisher(7, 1, "", "s"))
        + encode(Publish(1, [PublishedMessage(i, b"m") for i in range(3)]))
        + encode(StreamStats(8, "s"))
        + encode(StreamStats(9, "nope"))
        + encode(Metadata(10, ["s", "nope"]))
    )
    clock.advance(0)
    frames = {getattr(f, "correlation_id", None): f for f in transport.frames()}
    assert frames[6].stats == {"first_chunk_id": -1, "committed_chunk_id": -1}
    assert frames[8].stats == {"first_chunk_id": 0, "committed_chunk_id": 2}
    assert frames[9].response_code == c.STREAM_DOES_NOT_EXIST
    assert [(s.stream, s.response_code) for s in frames[10].streams] == [
        ("s", c.OK), ("nope", c.STREAM_DOES_NOT_EXIST)
    ]


def test_a_read_of_many_publishes_is_handled_a_turn_at_a_time_on_the_clock() -> None:
    # one socket read of 600 Publish frames: a turn's worth now, the rest on the clock's
    # next turns, and the socket is not read meanwhile (roost/backpressure.py)
    session, transport, clock = opened()
    session.data_received(encode(Create(5, "s")))
    clock.advance(0)  # the Create is durable and its turn is over
    assert transport.frames() == [Response(c.CREATE, 5, c.OK)]
    assert transport.reading
    stream = session.port.vhosts["/"].queues["s"]  # type: ignore[attr-defined]
    publishes = b"".join(
        encode(Publish(1, [PublishedMessage(i, b"m%d" % i)])) for i in range(600)
    )
    session.data_received(encode(DeclarePublisher(6, 1, "", "s")) + publishes)
    # the DeclarePublisher and 255 Publishes make one turn's share of frames
    assert stream.message_count == FRAMES_PER_TURN - 1
    assert not transport.reading
    clock.turn()
    assert stream.message_count == 2 * FRAMES_PER_TURN - 1
    assert not transport.reading
    clock.turn()
    assert stream.message_count == 600
    assert transport.reading
    clock.advance(0)
    confirms = [f for f in transport.frames() if isinstance(f, PublishConfirm)]
    confirmed = [i for f in confirms for i in f.publishing_ids]
    assert sorted(confirmed) == list(range(600))


def test_an_alarm_blocks_the_connection_at_its_next_publish_until_it_clears() -> None:
    # RabbitMQ's rule, through the ReadGate: an alarm does not stop a connection until it
    # publishes; then the frames after that Publish wait unread until the alarm clears
    session, transport, clock = opened()
    session.data_received(encode(Create(5, "s")) + encode(DeclarePublisher(6, 1, "", "s")))
    clock.advance(0)
    stream = session.port.vhosts["/"].queues["s"]  # type: ignore[attr-defined]
    alarms = session.port.alarms
    alarms.set_store_full(True)
    assert transport.reading  # declared a publisher, has not published yet
    session.data_received(
        encode(Publish(1, [PublishedMessage(0, b"a")]))
        + encode(Publish(1, [PublishedMessage(1, b"b")]))
    )
    assert not transport.reading
    clock.advance(1)
    assert not transport.reading and stream.message_count == 1  # the second waits unread
    alarms.set_store_full(False)
    clock.advance(0)
    assert transport.reading
    assert stream.message_count == 2
