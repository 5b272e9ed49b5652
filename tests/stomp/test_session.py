"""The STOMP session without sockets and without an event loop, over an in-memory broker:
what it does comes back as effects (stomp/effects.py), asserted as returned or carried out
on a fake plumbing's record; time and timers are a fake clock's (the plumbing's, handed
in). The
state table (stomp/states.py) decides what each frame may do; heart-beats and the
CONNECT deadline run on the fake clock's time."""

from __future__ import annotations

import pytest

from roost.backpressure import FRAMES_PER_TURN
from roost.core.flow import HIGH_MESSAGES
from roost.stomp.effects import ABORT, PAUSE, RESUME, Close, StartTimer, StopTimer, apply
from roost.stomp.errors import StompError
from roost.stomp.handler import StompHandler, StompSettings
from roost.stomp.states import TRANSITIONS, State, advance
from tests.brokers import memory_broker
from tests.fake_clock import FakeClock
from tests.stomp.sessions import CONNECT, FakePlumbing, connection, parse, session

FakeTransport = FakePlumbing  # (the name tests/stomp/test_subscription_queue.py uses)


def test_the_state_table_names_every_client_frame() -> None:
    assert advance(State.AWAITING_CONNECT, "STOMP") is State.CONNECTED
    assert advance(State.CONNECTED, "SEND") is State.CONNECTED
    assert advance(State.CONNECTED, "DISCONNECT") is State.CLOSED
    with pytest.raises(StompError, match="not connected"):
        advance(State.AWAITING_CONNECT, "SEND")
    with pytest.raises(StompError, match="unknown command"):
        advance(State.CONNECTED, "CONNECT")
    commands = {command for _state, command in TRANSITIONS}
    assert commands == {"CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK",
                        "BEGIN", "COMMIT", "ABORT", "DISCONNECT"}  # fmt: skip


def test_a_frame_before_connect_is_refused_by_the_table() -> None:
    handler, transport, _clock = session()
    handler.data_received(b"SEND\ndestination:/queue/q\n\nx\x00")
    [error] = transport.frames()
    assert error.command == "ERROR" and error.headers["message"] == "not connected"
    assert transport.closed and handler.state is State.AWAITING_CONNECT


def test_connect_then_disconnect_walks_the_states() -> None:
    handler, transport, _clock = session()
    handler.data_received(CONNECT)
    assert handler.state is State.CONNECTED
    handler.data_received(b"DISCONNECT\nreceipt:bye\n\n\x00")
    assert handler.state is State.CLOSED
    assert [f.command for f in transport.frames()] == ["CONNECTED", "RECEIPT"]
    assert transport.closed and handler.close_reason == "client sent DISCONNECT"


def test_no_connect_in_time_aborts_on_the_clock() -> None:
    handler, transport, clock = session()
    clock.advance(StompSettings().connect_timeout - 0.1)
    assert not transport.closed
    clock.advance(0.2)
    assert transport.aborted and handler.close_reason == "no CONNECT in time"


def test_a_silent_client_misses_its_heart_beats_on_the_clock() -> None:
    handler, transport, clock = session()
    handler.data_received(CONNECT)  # the client promises a beat every second
    clock.advance(1.5)
    handler.data_received(b"\n")  # a heart-beat
    clock.advance(1.9)
    assert not transport.closed
    clock.advance(1.0)  # more than two periods of silence
    assert transport.closed
    assert transport.frames()[-1].headers["message"] == "heart-beat timeout"


def test_subscribe_send_ack_without_an_event_loop() -> None:
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    handler.data_received(b"SUBSCRIBE\nid:s\ndestination:/queue/q\nack:client-individual\n\n\x00")
    clock.advance(0)  # the consumer starts after the frame (call_soon)
    handler.data_received(b"SEND\ndestination:/queue/q\n\nhello\x00")
    message = transport.frames()[-1]
    assert message.command == "MESSAGE" and message.body == b"hello"
    handler.data_received(f"ACK\nid:{message.headers['ack']}\n\n\x00".encode())
    assert handler.broker.vhosts["/"].queues["q"].unacked == 0  # type: ignore[attr-defined]


def test_a_read_is_handled_a_turn_at_a_time_on_the_clock() -> None:
    # one socket read of 600 SENDs: a turn's worth now, the rest on the clock's next
    # turns, and the socket is not read meanwhile (roost/backpressure.py)
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    send = b"SEND\ndestination:/queue/q\n\nx\x00"
    handler.data_received(b"SEND\ndestination:/queue/q\n\nfirst\x00")  # declares q
    queue = handler.broker.vhosts["/"].queues["q"]  # type: ignore[attr-defined]
    handler.data_received(send * 600)
    # CONNECT, "first" and 254 of them make one turn's share of frames
    assert queue.message_count == FRAMES_PER_TURN - 1
    assert not transport.reading
    clock.turn()
    assert queue.message_count == 2 * FRAMES_PER_TURN - 1
    assert not transport.reading
    clock.turn()
    assert queue.message_count == 601
    assert transport.reading


def test_a_congested_queue_holds_the_producer_until_its_consumer_goes() -> None:
    broker = memory_broker()
    clock = FakeClock()
    consumer, _ = connection(broker, clock)
    producer, producer_transport = connection(broker, clock)
    consumer.data_received(CONNECT)
    consumer.data_received(
        b"SUBSCRIBE\nid:s\ndestination:/queue/q\nack:client-individual\nprefetch-count:1\n\n\x00"
    )
    clock.advance(0)
    producer.data_received(CONNECT)
    queue = broker.vhosts["/"].queues["q"]
    sends = 0
    while producer_transport.reading and sends < 2 * HIGH_MESSAGES:  # the socket is read
        producer.data_received(b"SEND\ndestination:/queue/q\n\nx\x00" * FRAMES_PER_TURN)
        sends += FRAMES_PER_TURN
        clock.advance(0)
    # held right after the SEND that filled the queue: the rest of the read waits
    assert queue.flow.congested and producer.gate.flow_held
    assert HIGH_MESSAGES <= queue.message_count < HIGH_MESSAGES + FRAMES_PER_TURN
    held = queue.message_count
    clock.advance(1.0)
    assert queue.message_count == held and not producer_transport.reading  # still held
    consumer.data_received(b"DISCONNECT\n\n\x00")  # a queue without consumers holds no one
    clock.advance(0)
    assert producer_transport.reading and not producer.gate.flow_held
    clock.advance(0)
    assert queue.message_count == sends  # every SEND read, none lost


def test_receive_returns_the_frames_and_the_close_as_effects() -> None:
    handler = StompHandler(memory_broker(), StompSettings(), FakePlumbing(), set(),
                           clock=FakeClock())  # fmt: skip
    assert handler.take_effects() == [StartTimer("connect", StompSettings().connect_timeout)]
    effects = handler.receive(CONNECT + b"SUBSCRIBE\nid:s\ndestination:/queue/q\n\n\x00")
    # the deadline stops, one frame is written, the client's heart-beats are watched
    stop, connected, watch = effects
    assert stop == StopTimer("connect") and watch == StartTimer("heart-beat in", 1.0)
    assert isinstance(connected, bytes) and parse(connected)[0].command == "CONNECTED"
    effects = handler.receive(b"BEGIN\ntransaction:t\n\n\x00DISCONNECT\nreceipt:r\n\n\x00")
    receipt, *stops, close = effects  # its RECEIPT, the timers stopped, then the close
    assert isinstance(receipt, bytes) and parse(receipt)[0].command == "RECEIPT"
    assert all(isinstance(e, StopTimer) for e in stops) and close == Close(going_away=False)
    assert handler.take_effects() == [] and handler.receive(b"SEND\n\n\x00") == []


def test_a_stopping_server_closes_going_away_after_the_error() -> None:
    handler = StompHandler(memory_broker(), StompSettings(), FakePlumbing(), set(),
                           clock=FakeClock())  # fmt: skip
    handler.receive(CONNECT)
    handler.shutdown()
    effects = handler.take_effects()
    assert effects[-1] == Close(going_away=True) and isinstance(effects[0], bytes)
    assert parse(effects[0])[-1].headers["message"] == "connection closed by the broker"


def test_the_connect_deadline_returns_an_abort_due_now() -> None:
    _, plumbing, clock = session()
    plumbing.woken.clear()
    clock.advance(StompSettings().connect_timeout + 0.1)
    assert plumbing.aborted and plumbing.woken and all(plumbing.woken)  # done when made
    assert plumbing.timers is not None and not len(plumbing.timers)
    handler2 = StompHandler(memory_broker(), StompSettings(), FakePlumbing(), set(), clock=clock)
    [start] = handler2.take_effects()
    assert start == StartTimer("connect", StompSettings().connect_timeout)
    handler2.timer_fired("connect")  # the plumbing's timer is due
    assert handler2.take_effects()[-1] == ABORT and handler2.close_reason == "no CONNECT in time"


def test_deliveries_outside_a_read_wake_the_plumbing_once_and_leave_in_one_write() -> None:
    broker, clock = memory_broker(), FakeClock()
    consumer, plumbing = connection(broker, clock)
    producer, _ = connection(broker, clock)
    consumer.data_received(CONNECT + b"SUBSCRIBE\nid:s\ndestination:/queue/q\n\n\x00")
    clock.advance(0)
    plumbing.take()
    plumbing.woken.clear()
    writes = plumbing.writes
    producer.receive(CONNECT + b"SEND\ndestination:/queue/q\n\nm\x00" * 50)
    assert plumbing.woken == [False]  # one wake for the turn's 50 MESSAGEs, none due now
    effects = consumer.take_effects()
    # each MESSAGE in two pieces: its own headers, then its message's shared tail
    assert len(effects) == 100 and all(isinstance(e, bytes) for e in effects)
    assert all(e.startswith(b"MESSAGE\n") for e in effects[::2])
    apply(effects, plumbing)
    assert plumbing.writes == writes + 1  # joined into one write
    assert [f.body for f in parse(plumbing.data)[-50:]] == [b"m"] * 50


def test_a_big_backlog_is_due_at_once() -> None:
    broker, clock = memory_broker(), FakeClock()
    consumer, plumbing = connection(broker, clock)
    producer, _ = connection(broker, clock)
    consumer.data_received(CONNECT + b"SUBSCRIBE\nid:s\ndestination:/queue/q\n\n\x00")
    clock.advance(0)
    plumbing.take()
    plumbing.woken.clear()
    body = b"x" * 60_000
    producer.receive(CONNECT + b"SEND\ndestination:/queue/q\n\n" + body + b"\x00")
    assert plumbing.woken == [False]
    producer.receive(b"SEND\ndestination:/queue/q\n\n" + body + b"\x00" * 1)
    producer.receive((b"SEND\ndestination:/queue/q\n\n" + body + b"\x00") * 3)
    assert True in plumbing.woken and not consumer.effects  # 256 KiB made: carried out
    assert len([f for f in parse(plumbing.data) if f.command == "MESSAGE"]) >= 4


def test_a_held_read_returns_pause_and_the_next_turn_resume() -> None:
    handler = StompHandler(memory_broker(), StompSettings(), FakePlumbing(), set(),
                           clock=(clock := FakeClock()))  # fmt: skip
    handler.receive(b"CONNECT\naccept-version:1.2\n\n\x00")
    effects = handler.receive(b"SEND\ndestination:/queue/q\n\nx\x00" * (FRAMES_PER_TURN + 5))
    assert effects[-1] == PAUSE and PAUSE not in effects[:-1]
    clock.turn()  # the rest of the read, then the socket is read again
    assert handler.take_effects() == [RESUME]


def test_apply_keeps_the_order_and_joins_each_run_of_bytes() -> None:
    calls: list[object] = []

    class Record:
        def write(self, data: bytes) -> None:
            calls.append(data)

        def close(self, *, going_away: bool = False) -> None:
            calls.append(("close", going_away))

        def abort(self) -> None:
            calls.append("abort")

        def pause_reading(self) -> None:
            calls.append("pause")

        def resume_reading(self) -> None:
            calls.append("resume")

        def start_timer(self, name: str, delay: float) -> None:
            calls.append(("start", name, delay))

        def stop_timer(self, name: str) -> None:
            calls.append(("stop", name))

    effects = [b"a", b"b", PAUSE, b"c", RESUME, StartTimer("t", 2.0), b"d", b"e",
               StopTimer("t"), Close(going_away=True), ABORT]  # fmt: skip
    apply(effects, Record())  # type: ignore[arg-type]  # (a list of the union's members)
    assert calls == [b"ab", "pause", b"c", "resume", ("start", "t", 2.0), b"de", ("stop", "t"),
                     ("close", True), "abort"]  # fmt: skip


def test_a_long_lived_session_holds_one_timer_per_purpose() -> None:
    handler, plumbing, clock = session()
    handler.data_received(b"CONNECT\naccept-version:1.2\nheart-beat:10000,10000\n\n\x00")
    for _second in range(3600):  # an hour, the client beating every 5 s
        clock.advance(1.0)
        if _second % 5 == 0:
            handler.data_received(b"\n")
    assert not plumbing.closed and plumbing.timers is not None
    assert len(plumbing.timers) == 2  # heart-beats out and in: none of those that fired
    assert b"\n" in plumbing.data[-10:]  # it beat too


def test_a_message_fanned_out_is_encoded_for_each_subscribers_version() -> None:
    """A MESSAGE's tail (its properties' headers and body) is encoded once per message and
    shared by its subscribers: one on STOMP 1.0 still gets its unescaped headers, and a body
    over the kept size is encoded for each subscriber, whole."""
    broker, clock = memory_broker(), FakeClock()
    connect_10 = CONNECT.replace(b"accept-version:1.2", b"accept-version:1.0")
    subscribers = []
    for connect in (CONNECT, connect_10, CONNECT):
        handler, plumbing = connection(broker, clock)
        handler.data_received(connect + b"SUBSCRIBE\nid:s\ndestination:/topic/t\n\n\x00")
        subscribers.append(plumbing)
    clock.advance(0)
    producer, _ = connection(broker, clock)
    big = bytes(range(256)) * 300  # 76,800 bytes: over the kept tail's 64 KiB
    producer.data_received(CONNECT + b"SEND\ndestination:/topic/t\nx-note:a\\cb\n\nsmall\x00")
    producer.data_received(b"SEND\ndestination:/topic/t\ncontent-length:76800\n\n" + big + b"\x00")
    for plumbing in subscribers:
        plumbing.take()
    raw_12, raw_10 = subscribers[0].data, subscribers[1].data
    assert b"x-note:a\\cb\n" in raw_12 and b"x-note:a:b\n" in raw_10
    for plumbing in subscribers:
        messages = [f for f in parse(plumbing.data) if f.command == "MESSAGE"]
        assert [m.body for m in messages] == [b"small", big]
        assert [m.headers["message-id"] for m in messages] == ["1", "2"]
    first = raw_12.index(b"MESSAGE\n")  # (after a CONNECTED naming its own session)
    assert subscribers[2].data.endswith(raw_12[first:])  # the same MESSAGEs, byte for byte
