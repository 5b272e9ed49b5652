"""Which records of a queue store are live, in bits per segment instead of a slot each.

A queue appends its messages in sequence order, and every record of a segment carries
the next sequence number, so a segment covers one run of numbers, ``first`` onwards,
one *slot* each. What the store must know about a slot is two bits: gone (acknowledged,
dropped, or never a readable record) and delivered (its first delivery is on the ack
log). Where a record is in the file is not kept per slot: reads mostly go in order and
follow a cursor (queue_store.py), and the rest start from ``marks``, the offset of
every ``STRIDE``-th slot's record, and walk the records' headers from there.

Memory: 2 bits plus 4 / ``STRIDE`` bytes a message, about 0.4 bytes (it was an 8-byte
location per message, 80 MB for a backlog of ten million; this is 4 MB).
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator

STRIDE = 16  # slots per mark: a read that misses the cursor walks at most this many
_NONZERO = re.compile(rb"[^\x00]")
_NOT_FULL = re.compile(rb"[^\xff]")


class Segment:
    """One segment file's slots: ``first`` to ``first + slots - 1``."""

    __slots__ = ("first", "gone", "jumps", "live", "marks", "number", "seen", "slots")

    def __init__(self, number: int, first: int) -> None:
        self.number = number
        self.first = first
        self.slots = 0
        self.live = 0
        self.gone = bytearray()
        self.seen: bytearray | None = None  # made at the first delivered mark
        self.marks = array("I")  # offset of the record of slot k * STRIDE (or the next one)
        # records that follow damage (numbers missing before them): seq -> offset, so
        # that no walk crosses the damaged bytes
        self.jumps: dict[int, int] | None = None

    def add(self, seq: int, offset: int, live: bool) -> None:
        """The record of ``seq`` is at ``offset``; numbers skipped since the last one
        (records lost to damage) are gone."""
        i = seq - self.first
        gone = self.gone
        need = (i >> 3) + 1
        if len(gone) < need:
            gone.extend(bytes(need - len(gone)))
        if i > self.slots:
            for j in range(self.slots, i):
                gone[j >> 3] |= 1 << (j & 7)
            if self.jumps is None:
                self.jumps = {}
            self.jumps[seq] = offset
        marks = self.marks
        while len(marks) * STRIDE <= i:
            marks.append(offset)
        self.slots = i + 1
        if live:
            self.live += 1
        else:
            gone[i >> 3] |= 1 << (i & 7)

    def covers(self, seq: int) -> bool:
        return 0 <= seq - self.first < self.slots

    def is_live(self, seq: int) -> bool:
        i = seq - self.first
        return 0 <= i < self.slots and not self.gone[i >> 3] & (1 << (i & 7))

    def drop(self, seq: int) -> bool:
        """A live slot goes; True when it had a delivered mark."""
        i = seq - self.first
        self.gone[i >> 3] |= 1 << (i & 7)
        self.live -= 1
        seen = self.seen
        if seen is not None and (i >> 3) < len(seen) and seen[i >> 3] & (1 << (i & 7)):
            seen[i >> 3] &= ~(1 << (i & 7))
            return True
        return False

    def was_delivered(self, seq: int) -> bool:
        i = seq - self.first
        seen = self.seen
        return seen is not None and (i >> 3) < len(seen) and bool(seen[i >> 3] & (1 << (i & 7)))

    def deliver(self, seq: int) -> None:
        i = seq - self.first
        if self.seen is None:
            self.seen = bytearray(len(self.gone))
        elif len(self.seen) < len(self.gone):
            self.seen.extend(bytes(len(self.gone) - len(self.seen)))
        self.seen[i >> 3] |= 1 << (i & 7)

    def start(self, seq: int, near: int, near_offset: int) -> int:
        """The offset to walk from to reach ``seq``'s record: the nearest of the mark
        before it, the record ``near`` at ``near_offset`` (a cursor; 0: none) and the
        records right after damage."""
        k = (seq - self.first) // STRIDE
        at, offset = self.first + k * STRIDE, self.marks[k]
        if at <= near <= seq:
            at, offset = near, near_offset
        if self.jumps is not None:
            for jump, jump_offset in self.jumps.items():
                if at < jump <= seq:
                    at, offset = jump, jump_offset
        return offset

    def first_live(self) -> int:
        """The sequence number of the first live slot (the segment has one)."""
        return self.first + next_bit(self.gone, 0, self.slots, False)

    def gone_runs(self) -> Iterator[tuple[int, int]]:
        """[start, stop) sequence numbers of each run of gone slots, in order."""
        yield from _runs(self.gone, self.slots, self.first)

    def delivered(self) -> Iterator[int]:
        """The live slots with a delivered mark (marks are cleared when a slot goes)."""
        if self.seen is not None:
            for start, stop in _runs(self.seen, self.slots, self.first):
                yield from range(start, stop)


def _runs(bits: bytearray, n: int, base: int) -> Iterator[tuple[int, int]]:
    i = 0
    while i < n:
        start = next_bit(bits, i, n, True)
        if start >= n:
            return
        i = next_bit(bits, start, n, False)
        yield base + start, base + i


def next_bit(bits: bytearray, i: int, n: int, value: bool) -> int:
    """The first bit index from ``i`` (below ``n``) whose bit is ``value``, or ``n``.
    Whole bytes that cannot hold it are skipped by a regular expression, in C. Bits past
    the end of ``bits`` are 0 (a bitmap grows only as far as its last 1)."""
    skip = _NONZERO if value else _NOT_FULL
    stored = len(bits) << 3
    while i < n:
        if i >= stored:
            return n if value else i
        if i & 7 == 0:
            found = skip.search(bits, i >> 3, (n + 7) >> 3)
            i = stored if found is None else found.start() << 3
            if i >= n:
                return n
            if i >= stored:
                continue
        if bool(bits[i >> 3] & (1 << (i & 7))) is value:
            return i
        i += 1
    return n
