"""What the sans-IO STOMP session returns to its plumbing instead of doing it: bytes to
write, and the effects ``Close``, ``Abort``, ``PauseReading``, ``ResumeReading``,
``StartTimer``, ``StopTimer``, in the order the session made them (a close comes after
the ERROR frame it follows). A timer started this way fires as the session's
``timer_fired(name)``; the plumbing keeps them in a ``lifecycle.Timers`` on its loop.

The session (stomp/handler.py) collects them in its ``effects`` list; the plumbing takes
them (``StompHandler.take_effects``, or ``receive``, which feeds bytes and returns what
they produced) and carries them out with ``apply``. Effects made outside a read (a
delivery, a timer, another connection's ack resuming this one) are announced through the
``wake`` callback the plumbing hands in: ``wake(False)`` once for the first effect since
the last take (the plumbing takes them at the end of the read or loop turn, so many
frames still leave in one write), ``wake(True)`` when they should be carried out now (a
close, a pause, resume or timer, or ``DRAIN_AT`` bytes waiting), as the plumbing did
them immediately before."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol


class Target(Protocol):
    """What carries effects out: stomp/protocol.py's TCP plumbing, stomp/ws.py's
    WebSocket one, a test's recorder."""

    def write(self, data: bytes) -> None: ...

    def close(self, *, going_away: bool = False) -> None: ...

    def abort(self) -> None: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def start_timer(self, name: str, delay: float) -> None: ...

    def stop_timer(self, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Close:
    """Send what was written before, then close; ``going_away`` when the server is
    stopping (WebSocket close code 1001)."""

    going_away: bool = False

    def apply(self, target: Target) -> None:
        target.close(going_away=self.going_away)


@dataclass(frozen=True, slots=True)
class Abort:
    """Drop the connection and what is queued for it (no CONNECT in time)."""

    def apply(self, target: Target) -> None:
        target.abort()


@dataclass(frozen=True, slots=True)
class PauseReading:
    """Read no more input until ``ResumeReading`` (the ReadGate, roost/backpressure.py)."""

    def apply(self, target: Target) -> None:
        target.pause_reading()


@dataclass(frozen=True, slots=True)
class ResumeReading:
    def apply(self, target: Target) -> None:
        target.resume_reading()


@dataclass(frozen=True, slots=True)
class StartTimer:
    """Call the session's ``timer_fired(name)`` in ``delay`` seconds, instead of the
    timer of that name if one is running."""

    name: str
    delay: float

    def apply(self, target: Target) -> None:
        target.start_timer(self.name, self.delay)


@dataclass(frozen=True, slots=True)
class StopTimer:
    name: str

    def apply(self, target: Target) -> None:
        target.stop_timer(self.name)


Effect = bytes | Close | Abort | PauseReading | ResumeReading | StartTimer | StopTimer

ABORT: Final = Abort()
PAUSE: Final = PauseReading()
RESUME: Final = ResumeReading()
# bytes waiting that are carried out at once rather than at the end of the read or turn
# (as the TCP plumbing's FLUSH_AT): a big burst is not held for a whole turn
DRAIN_AT: Final = 256 * 1024


def apply(effects: list[Effect], target: Target) -> None:
    """Carry ``effects`` out in order; each run of bytes is one ``write`` (joined once
    here, so the plumbing's batch holds one piece)."""
    run: list[bytes] = []
    for effect in effects:
        if type(effect) is bytes:
            run.append(effect)
            continue
        if run:
            target.write(run[0] if len(run) == 1 else b"".join(run))
            run = []
        effect.apply(target)  # type: ignore[union-attr]  # bytes went above
    if run:
        target.write(run[0] if len(run) == 1 else b"".join(run))

