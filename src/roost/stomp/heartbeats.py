"""STOMP heart-beats: the periods negotiated at CONNECT, beats sent when the session is
quiet, and the close of a client that stopped beating (timers the session starts as
effects; the time is its clock's)."""

from __future__ import annotations

import logging

from mypy_extensions import trait

from roost.stomp.effects import StartTimer
from roost.stomp.errors import StompError
from roost.stomp.session_state import SessionState

log = logging.getLogger("roost.stomp")
BEAT_TICKS = 4  # heart-beat checks per promised period (_send_heartbeat)
BEAT_TIMER = "heart-beat out"  # the session's timers (StartTimer, StompHandler.timer_fired)
CHECK_TIMER = "heart-beat in"


@trait  # a part of the compiled StompHandler (docs/compiled.md)
class Heartbeats(SessionState):
    def _negotiate_heartbeat(self, value: str) -> tuple[int, int]:
        """(server sends every, server expects every) in ms, as the spec computes them."""
        try:
            cx, cy = (int(v) for v in value.split(","))
        except ValueError as exc:
            raise StompError("invalid heart-beat header", repr(value)) from exc
        if cx < 0 or cy < 0:
            raise StompError("invalid heart-beat header", repr(value))
        floor = self.settings.heartbeat_ms
        send = max(cy, floor) if cy else 0
        expect = max(cx, floor) if cx else 0
        if self.version == "1.0":
            return 0, 0
        return send, expect

    def _send_heartbeat(self, tick: float) -> None:
        """Every quarter of the promised period: after two ticks with nothing written, a
        heart-beat. The last write came after the tick before those two, so the silence
        stays under three ticks (3/4 of the period) with a quarter left for timer jitter;
        an idle connection gets one every half period, as from RabbitMQ."""
        if self.closed:
            return
        if self._wrote:
            self._wrote = False
            self._silent_ticks = 0
        else:
            self._silent_ticks += 1
            if self._silent_ticks >= 2:
                self.write(b"\n")
                self._wrote = False
                self._silent_ticks = 0
        self._effect(StartTimer(BEAT_TIMER, tick))

    def _check_heartbeat(self, interval: float) -> None:
        if self.closed:
            return
        if self.gate.paused:  # its heart-beats wait unread in the socket
            self.heard()  # (a method: mypyc 2.4 fails on a float stored by a trait)
        silent = self._clock.time() - self._heard
        if silent > 2 * interval:  # the spec's "some tolerance": two whole intervals
            log.warning("%s: missed heart-beats from client", self.endpoint.peer)
            self._error("heart-beat timeout", f"no data from the client for {silent:.1f}s")
            return
        self._effect(StartTimer(CHECK_TIMER, interval / 2))
