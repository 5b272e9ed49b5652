"""What a named stream consumer has processed: the offset it may store.

Deliveries of one subscription go out in increasing offsets, but the client may settle
them in any order. Storing the highest acked offset would let a later resume skip an
earlier delivery that was never processed (LavinMQ issue 1171 lost messages that way),
so the stored offset only moves to the end of the *contiguous* run of settled
deliveries. A delivery given back unprocessed (nack or reject with requeue, recover, a
channel closed with it unacked, an ack deadline) freezes the stored offset before it
for the rest of the subscription: resuming from ``stored`` reads it again.
"""

from __future__ import annotations

from collections import deque


class Progress:
    """One subscription of a named consumer (``x-stream-consumer-name``)."""

    __slots__ = ("_done", "_pending", "frozen", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._pending: deque[int] = deque()  # delivered, in offset order, not yet settled
        self._done: set[int] = set()  # settled while an earlier delivery was outstanding
        self.frozen = False

    def delivered(self, offset: int) -> None:
        if not self.frozen:
            self._pending.append(offset)

    def settled(self, offset: int) -> int | None:
        """``offset`` was processed (acked, or dropped by the consumer): the new end of
        the contiguous settled run, or None when it did not move."""
        pending = self._pending
        if self.frozen or not pending:
            return None
        if pending[0] != offset:
            self._done.add(offset)
            return None
        pending.popleft()
        done = self._done
        while pending and pending[0] in done:
            offset = pending.popleft()
            done.discard(offset)
        return offset

    def given_back(self) -> None:
        """A delivery was returned unprocessed: nothing after it may be stored."""
        self.frozen = True
        self._pending.clear()
        self._done.clear()
