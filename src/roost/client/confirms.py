"""Publisher-confirm bookkeeping: which publishes the broker has settled (pure)."""

from __future__ import annotations


class ConfirmTracker:
    """Counts settled delivery tags from basic.ack / basic.nack, single or multiple.

    Tags are 1, 2, 3… in publish order. ``floor`` is the highest tag below which
    everything is settled; single acks above it wait in a small set until the gap
    closes, so an out-of-order ack is never counted twice.
    """

    __slots__ = ("_above", "acked", "floor", "nacked")

    def __init__(self) -> None:
        self.floor = 0
        self._above: set[int] = set()
        self.acked = 0
        self.nacked = 0

    @property
    def settled(self) -> int:
        return self.acked + self.nacked

    def settle(self, tag: int, multiple: bool, ok: bool = True) -> int:
        """Record one ack (``ok``) or nack; returns how many publishes it newly settled."""
        if multiple:
            n = 0
            if tag > self.floor:
                n = tag - self.floor
                if self._above:
                    covered = {t for t in self._above if t <= tag}
                    n -= len(covered)
                    self._above -= covered
                self.floor = tag
                self._advance()
        elif tag <= self.floor or tag in self._above:
            n = 0
        else:
            self._above.add(tag)
            n = 1
            self._advance()
        if ok:
            self.acked += n
        else:
            self.nacked += n
        return n

    def _advance(self) -> None:
        above = self._above
        while self.floor + 1 in above:
            self.floor += 1
            above.remove(self.floor)
