"""The STOMP session's way out: what it does is a list of effects (stomp/effects.py) the
plumbing takes, announced through the ``wake`` callback the plumbing handed in (see
stomp/effects.py for when it says False and when True)."""

from __future__ import annotations

from mypy_extensions import trait

from roost.stomp.effects import DRAIN_AT, Effect
from roost.stomp.frame_encoding import serialize
from roost.stomp.session_state import SessionState


@trait  # a part of the compiled StompHandler (docs/compiled.md)
class Output(SessionState):
    def receive(self, data: bytes) -> list[Effect]:
        """Feed bytes read from the peer; what they made the session do."""
        self.data_received(data)
        return self.take_effects()

    def take_effects(self) -> list[Effect]:
        """The effects made since the last take, for the plumbing to carry out."""
        effects = self.effects
        if effects:
            self.effects = []
            self._effect_bytes = 0
        return effects

    def write_frame(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        self.write(serialize(command, headers, body, version=self.version))

    def write(self, data: bytes) -> None:
        self.effects.append(data)
        self._queued(len(data), 1)

    def write_frame_parts(self, head: bytes, tail: bytes) -> None:
        """One frame written as two pieces, which ``apply`` joins with the rest of the run:
        a MESSAGE's own headers and its message's shared tail (stomp/delivering.py)."""
        effects = self.effects
        effects.append(head)
        effects.append(tail)
        self._queued(len(head) + len(tail), 2)

    def _queued(self, size: int, pieces: int) -> None:
        """A frame of ``size`` bytes was just added as ``pieces`` effects: count it, and
        wake the plumbing at the first effect since the last take, or now at DRAIN_AT."""
        self.traffic.send_oct += size
        self.traffic.send_cnt += 1
        self._wrote = True
        if len(self.effects) == pieces:
            self._wake(False)
        self._effect_bytes += size
        if self._effect_bytes >= DRAIN_AT:
            self._wake(True)

    def _effect(self, effect: Effect) -> None:
        """Close, abort, pause, resume, a timer: carried out now, after what was written."""
        self.effects.append(effect)
        self._wake(True)


def no_wake(_now: bool) -> None:
    """A session driven by ``receive`` and ``take_effects`` alone (tests)."""
