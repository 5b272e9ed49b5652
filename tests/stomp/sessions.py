"""A sans-IO STOMP session under test: the handler, the plumbing it drives and a fake clock."""

from __future__ import annotations

from typing import Any

from roost.lifecycle import Timers
from roost.stomp.effects import apply
from roost.stomp.frames import NEED_DATA, Frame, FrameParser
from roost.stomp.handler import StompHandler, StompSettings
from roost.stomp.transport import Clock
from tests.brokers import memory_broker
from tests.fake_clock import FakeClock

CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nheart-beat:1000,0\n\n\x00"


class FakePlumbing:
    """Plays stomp/protocol.py for one session: who the peer is, and the effects the
    session returns (stomp/effects.py), carried out on a record: the bytes written, the
    writes made, whether it closed, aborted, reads. Effects made outside a read wait in
    the session until a test looks (``frames``) or the session says they are due now
    (``wake(True)``), as the real plumbing takes them at the end of the loop turn."""

    peer = "127.0.0.1:5000"
    cert_user: str | None = None
    tls = False

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock
        self.handler: StompHandler | None = None
        self.timers = Timers(clock) if clock is not None else None  # the session's
        self.data = b""
        self.writes = 0
        self.closed = self.aborted = self.going_away = False
        self.reading = True
        self.woken: list[bool] = []

    def wake(self, now: bool) -> None:
        self.woken.append(now)
        if now:
            self.take()

    def take(self) -> None:
        if self.handler is not None:
            apply(self.handler.take_effects(), self)

    def write(self, data: bytes) -> None:
        self.data += data
        self.writes += 1

    def close(self, *, going_away: bool = False) -> None:
        self.closed = True
        self.going_away = going_away

    def abort(self) -> None:
        self.closed = self.aborted = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def start_timer(self, name: str, delay: float) -> None:
        assert self.timers is not None
        self.timers.set(name, delay, self._fired, name)

    def stop_timer(self, name: str) -> None:
        assert self.timers is not None
        self.timers.cancel(name)

    def _fired(self, name: str) -> None:
        assert self.handler is not None
        self.handler.timer_fired(name)

    def frames(self) -> list[Frame]:
        self.take()
        return parse(self.data)


def parse(data: bytes) -> list[Frame]:
    parser = FrameParser()
    parser.feed(data)
    out = []
    while (f := parser.next_frame()) is not NEED_DATA:
        assert isinstance(f, Frame)
        out.append(f)
    return out


def connection(broker: Any, clock: FakeClock) -> tuple[StompHandler, FakePlumbing]:
    plumbing = FakePlumbing(clock)
    handler = StompHandler(broker, StompSettings(), plumbing, set(), clock=clock,
                           wake=plumbing.wake)  # fmt: skip
    plumbing.handler = handler
    plumbing.take()  # the CONNECT deadline, started as the session was made
    return handler, plumbing


def session() -> tuple[StompHandler, FakePlumbing, FakeClock]:
    clock = FakeClock()
    handler, plumbing = connection(memory_broker(), clock)
    return handler, plumbing, clock
