"""The ready entries of a durable queue: objects at the head, integers in the tail.

A backlog of paged-out persistent messages needs only what brings each one back: its
queue sequence number, its store slot, its size and two flags. An ``Entry`` object with
its ints costs ~180 bytes; here a paged-out entry costs 5 bytes (size and flags arrays),
because sequence numbers and slots come in runs (both grow by one per message while only
persistent messages arrive) kept as one triple per run. Ten million queued messages then
need tens of megabytes here, not gigabytes.

The first ``window`` entries stay objects in a deque (they carry their messages, ready
for delivery); once the tail holds anything, every later entry goes to the tail to keep
FIFO order. An entry that cannot be packed (its message still in memory, a deadline, a
past delivery) is kept as an object in the tail, in order, behind a placeholder.
"""

from __future__ import annotations

from array import array
from bisect import insort
from collections import deque
from collections.abc import Iterable, Iterator

from roost.core.features.lifecycle import UNKNOWN
from roost.core.queues.entry import Entry

_REDELIVERED = 1
_EXPIRY_UNKNOWN = 2  # recovered: the deadline is read from the message at the head
_OBJECT = 4  # not packed: the entry is the next one in ``_objects``
_MAX_SIZE = 0xFFFFFFFF
_COMPACT_AFTER = 4096  # drop popped array slots once this many (and half) are dead


class PagedReady:
    """FIFO of ready entries with the tail packed into arrays (see the module doc)."""

    __slots__ = (
        "_first",
        "_flags",
        "_objects",
        "_run",
        "_run_pos",
        "_run_seq",
        "_run_slot",
        "_sizes",
        "head",
        "window",
    )

    def __init__(self, entries: Iterable[Entry] = (), window: int = 1024) -> None:
        self.head: deque[Entry] = deque(entries)
        self.window = window
        self._reset_tail()

    def _reset_tail(self) -> None:
        self._sizes = array("I")
        self._flags = array("B")
        self._objects: deque[Entry] = deque()
        # runs: from array position run_pos[r] on, packed entries have consecutive
        # sequence numbers and slots starting at run_seq[r] and run_slot[r]
        self._run_pos = array("Q")
        self._run_seq = array("Q")
        self._run_slot = array("Q")
        self._run = 0  # the run of the first live position
        self._first = 0  # array position of the oldest live tail entry

    @property
    def tail_length(self) -> int:
        return len(self._flags) - self._first

    def __len__(self) -> int:
        return len(self.head) + len(self._flags) - self._first

    def __bool__(self) -> bool:
        return bool(self.head) or len(self._flags) > self._first

    # -- adding ---------------------------------------------------------------------------

    def append(self, entry: Entry, /) -> None:
        if len(self._flags) == self._first and (
            entry.message is not None or len(self.head) < self.window
        ):
            self.head.append(entry)
        else:
            self._append_tail(entry)

    def _append_tail(self, entry: Entry) -> None:
        flags = _REDELIVERED if entry.redelivered else 0
        packable = (
            entry.message is None
            and entry.slot > 0
            and not entry.deliveries
            and entry.size <= _MAX_SIZE
            and type(entry) is Entry
        )
        if entry.expires == UNKNOWN:
            flags |= _EXPIRY_UNKNOWN
        elif entry.expires:
            packable = False
        if not packable:
            self._objects.append(entry)
            self._sizes.append(0)
            self._flags.append(_OBJECT)
            return
        pos = len(self._flags)
        if not self._continues_run(pos, entry):
            self._run_pos.append(pos)
            self._run_seq.append(entry.seq)
            self._run_slot.append(entry.slot)
        self._sizes.append(entry.size)
        self._flags.append(flags)

    def _continues_run(self, pos: int, entry: Entry) -> bool:
        """Unpacking is affine in the position, so a match is all a run needs."""
        if not self._run_pos:
            return False
        step = pos - self._run_pos[-1]
        return entry.seq == self._run_seq[-1] + step and entry.slot == self._run_slot[-1] + step

    def appendleft(self, entry: Entry, /) -> None:
        self.head.appendleft(entry)

    def put_back(self, entry: Entry) -> None:
        """A requeued entry goes back to its place by seq. Delivered entries came from
        the head, before anything in the tail, so this stays within the head."""
        while len(self._flags) > self._first and self._peek_seq() < entry.seq:
            self.head.append(self._pop_tail())
        insort(self.head, entry)

    # -- taking ---------------------------------------------------------------------------

    def popleft(self) -> Entry:
        if self.head:
            return self.head.popleft()
        if len(self._flags) == self._first:
            raise IndexError("pop from an empty queue")
        return self._pop_tail()

    def __getitem__(self, index: int, /) -> Entry:
        if index < 0:
            index += len(self)
        head = self.head
        while len(head) <= index and len(self._flags) > self._first:
            head.append(self._pop_tail())
        return head[index]

    def _locate(self, pos: int) -> int:
        """The run holding array position ``pos`` (at or after the current run)."""
        run, run_pos = self._run, self._run_pos
        while run + 1 < len(run_pos) and run_pos[run + 1] <= pos:
            run += 1
        return run

    def _peek_seq(self) -> int:
        pos = self._first
        if self._flags[pos] & _OBJECT:
            return self._objects[0].seq
        run = self._locate(pos)
        return self._run_seq[run] + pos - self._run_pos[run]

    def _pop_tail(self) -> Entry:
        pos = self._first
        flags = self._flags[pos]
        if flags & _OBJECT:
            entry = self._objects.popleft()
        else:
            run = self._run = self._locate(pos)
            step = pos - self._run_pos[run]
            entry = self._unpack(run, step, pos, flags)
        self._first = pos + 1
        if self._first == len(self._flags):
            self._reset_tail()
        elif self._first >= _COMPACT_AFTER and 2 * self._first >= len(self._flags):
            self._compact()
        return entry

    def _unpack(self, run: int, step: int, pos: int, flags: int) -> Entry:
        entry = Entry(self._run_seq[run] + step, None, self._sizes[pos])
        entry.slot = self._run_slot[run] + step
        if flags & _REDELIVERED:
            entry.redelivered = True
        if flags & _EXPIRY_UNKNOWN:
            entry.expires = UNKNOWN
        return entry

    def _compact(self) -> None:
        """Drop the popped positions so the arrays do not grow without bound."""
        first = self._first
        run = self._locate(first)
        run_pos, run_seq, run_slot = self._run_pos, self._run_seq, self._run_slot
        if run < len(run_pos) and run_pos[run] < first:
            # the run holding ``first`` now starts there, its seq and slot advanced
            step = first - run_pos[run]
            run_seq[run] += step
            run_slot[run] += step
            run_pos[run] = first
        for arr in (run_pos, run_seq, run_slot):
            del arr[:run]
        for i in range(len(run_pos)):
            run_pos[i] -= first
        del self._sizes[:first]
        del self._flags[:first]
        self._run = 0
        self._first = 0

    def clear(self) -> None:
        self.head.clear()
        self._reset_tail()

    def __iter__(self) -> Iterator[Entry]:
        yield from self.head
        objects = iter(self._objects)
        run = self._run
        run_pos = self._run_pos
        for pos in range(self._first, len(self._flags)):
            flags = self._flags[pos]
            if flags & _OBJECT:
                yield next(objects)
                continue
            while run + 1 < len(run_pos) and run_pos[run + 1] <= pos:
                run += 1
            yield self._unpack(run, pos - run_pos[run], pos, flags)
