"""A channel's output held behind replies that wait for the disk.

The reply to a change of durable definitions (queue.declare-ok for a durable queue,
bind-ok, …) goes out only once the change is fsync'ed (core.completion.Completion).
Everything the channel sends after such a reply waits behind it, so a client sees its
channel's frames in the order the methods ran: a consume-ok never overtakes the
declare-ok before it, a delivery never overtakes that consume-ok. A channel with
nothing held writes straight through.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class Barrier:
    """A reply waiting for the disk, and the frames sent after it."""

    __slots__ = ("frames", "settled")

    def __init__(self, reply: bytes) -> None:
        self.frames = [reply]
        self.settled = False


class HeldOutput:
    """``send`` is the writer itself while nothing is held (the hot path costs no check),
    and ``_behind`` while a barrier is up: swapped by ``hold``, ``release`` and ``clear``."""

    __slots__ = ("_barriers", "_write", "send")

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._barriers: deque[Barrier] = deque()
        self.send: Callable[[bytes], None] = write

    def _behind(self, frame: bytes) -> None:
        self._barriers[-1].frames.append(frame)

    def hold(self, reply: bytes) -> Barrier:
        """``reply`` goes out when ``release`` is called for the barrier returned."""
        barrier = Barrier(reply)
        self._barriers.append(barrier)
        self.send = self._behind
        return barrier

    def release(self, barrier: Barrier) -> None:
        barrier.settled = True
        barriers = self._barriers
        while barriers and barriers[0].settled:
            frames = barriers.popleft().frames
            if not barriers:
                # before writing: a write may flush and send more (confirms) at once
                self.send = self._write
            for frame in frames:
                self._write(frame)

    def clear(self) -> None:
        """The channel is gone: what it held is never sent."""
        self._barriers.clear()
        self.send = self._write
