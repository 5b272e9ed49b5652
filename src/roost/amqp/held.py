"""A channel's output held behind replies that wait for the disk.

The reply to a change of durable definitions (queue.declare-ok for a durable queue,
bind-ok, …) goes out only once the change is fsync'ed (core.broker ``after_durable``).
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
    __slots__ = ("_barriers", "_write")

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._barriers: deque[Barrier] = deque()

    def send(self, frame: bytes) -> None:
        if self._barriers:
            self._barriers[-1].frames.append(frame)
        else:
            self._write(frame)

    def hold(self, reply: bytes) -> Barrier:
        """``reply`` goes out when ``release`` is called for the barrier returned."""
        barrier = Barrier(reply)
        self._barriers.append(barrier)
        return barrier

    def release(self, barrier: Barrier) -> None:
        barrier.settled = True
        barriers = self._barriers
        while barriers and barriers[0].settled:
            for frame in barriers.popleft().frames:
                self._write(frame)

    def clear(self) -> None:
        """The channel is gone: what it held is never sent."""
        self._barriers.clear()
