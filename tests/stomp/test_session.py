"""The STOMP session without sockets and without an event loop: a fake transport and a
fake clock (time and timers are the plumbing's, handed in), over an in-memory broker. The
state table (stomp/states.py) decides what each frame may do; heart-beats and the
CONNECT deadline run on the fake clock's time."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from roost.backpressure import FRAMES_PER_TURN
from roost.core.flow import HIGH_MESSAGES
from roost.stomp.errors import StompError
from roost.stomp.frames import NEED_DATA, Frame, FrameParser
from roost.stomp.handler import StompHandler, StompSettings
from roost.stomp.states import TRANSITIONS, State, advance
from tests.brokers import memory_broker

CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nheart-beat:1000,0\n\n\x00"


class FakeTimer:
    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    def cancelled(self) -> bool:
        return self._cancelled


class FakeClock:
    """Time moves only when a test says so; due callbacks run then, in order."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._due: list[tuple[float, int, FakeTimer, Callable[..., object], tuple[Any, ...]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        timer = FakeTimer()
        heapq.heappush(self._due, (self.now + delay, next(self._order), timer, callback, args))
        return timer

    def call_soon(self, callback: Callable[..., object], *args: Any) -> FakeTimer:
        return self.call_later(0.0, callback, *args)

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while self._due and self._due[0][0] <= end:
            when, _, timer, callback, args = heapq.heappop(self._due)
            self.now = when
            if not timer.cancelled():
                callback(*args)
        self.now = end

    def turn(self) -> None:
        """One loop iteration: the callbacks due now, not those they schedule."""
        due = []
        while self._due and self._due[0][0] <= self.now:
            due.append(heapq.heappop(self._due))
        for _when, _, timer, callback, args in due:
            if not timer.cancelled():
                callback(*args)


class FakeTransport:
    peer = "127.0.0.1:5000"
    cert_user: str | None = None
    tls = False

    def __init__(self) -> None:
        self.data = b""
        self.closed = self.aborted = False
        self.reading = True

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self, *, going_away: bool = False) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def frames(self) -> list[Frame]:
        parser = FrameParser()
        parser.feed(self.data)
        out = []
        while (f := parser.next_frame()) is not NEED_DATA:
            assert isinstance(f, Frame)
            out.append(f)
        return out


def session() -> tuple[StompHandler, FakeTransport, FakeClock]:
    transport, clock = FakeTransport(), FakeClock()
    handler = StompHandler(memory_broker(), StompSettings(), transport, set(), clock=clock)
    return handler, transport, clock


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
    consumer_transport, producer_transport = FakeTransport(), FakeTransport()
    consumer = StompHandler(broker, StompSettings(), consumer_transport, set(), clock=clock)
    producer = StompHandler(broker, StompSettings(), producer_transport, set(), clock=clock)
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
