"""The ready entries of a durable queue: objects at the head, runs in the tail.

A backlog of paged-out persistent messages needs only what brings each one back: its
queue sequence number, its store slot and two flags. Both numbers grow by one per
message while only persistent messages arrive, so the tail keeps one ``_Run`` (first
seq, first slot, count, flags) per stretch of such entries instead of anything per
message: ten million queued messages cost a few runs here. What a run does not know is
each message's size: an entry leaves a run through ``page_in`` (the queue reads the
message back from its store, as it must to deliver it), which gives the entry its
message and size, so the queue's ``ready_bytes`` (counted at push) stays exact.

The first ``window`` entries stay objects in a deque (they carry their messages, ready
for delivery); once the tail holds anything, every later entry goes to the tail to keep
FIFO order. An entry that cannot be packed (its message still in memory, a deadline, a
past delivery) is kept as an object in the tail, in order, between runs.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from roost.core.features.lifecycle import UNKNOWN
from roost.core.queues.entry import Entry

_REDELIVERED = 1
_EXPIRY_UNKNOWN = 2  # recovered: the deadline is read from the message at the head


class _Run:
    """``count`` packed entries: seqs from ``seq`` and slots from ``slot``, one apart."""

    __slots__ = ("count", "flags", "seq", "slot")

    def __init__(self, seq: int, slot: int, flags: int) -> None:
        self.seq = seq
        self.slot = slot
        self.count = 1
        self.flags = flags


class PagedReady:
    """FIFO of ready entries with the tail packed into runs (see the module doc)."""

    __slots__ = ("_page_in", "_tail", "_tail_len", "head", "window")

    def __init__(
        self,
        entries: Iterable[Entry] = (),
        window: int = 1024,
        page_in: Callable[[Entry], None] | None = None,
    ) -> None:
        self.head: deque[Entry] = deque(entries)
        self.window = window
        # reads an unpacked entry's message back (and sets its size); None: sizes stay 0
        self._page_in = page_in
        self._tail: deque[Entry | _Run] = deque()
        self._tail_len = 0

    @property
    def tail_length(self) -> int:
        return self._tail_len

    def __len__(self) -> int:
        return len(self.head) + self._tail_len

    def __bool__(self) -> bool:
        return bool(self.head) or self._tail_len > 0

    # -- adding ---------------------------------------------------------------------------

    def append(self, entry: Entry, /) -> None:
        if not self._tail_len and (entry.message is not None or len(self.head) < self.window):
            self.head.append(entry)
        else:
            self._append_tail(entry)

    def _append_tail(self, entry: Entry) -> None:
        self._tail_len += 1
        tail = self._tail
        flags = _REDELIVERED if entry.redelivered else 0
        if entry.expires == UNKNOWN:
            flags |= _EXPIRY_UNKNOWN
        if (
            entry.message is not None
            or not entry.slot
            or entry.deliveries
            or (entry.expires and entry.expires != UNKNOWN)
            or type(entry) is not Entry
        ):
            tail.append(entry)  # not packable: kept as it is
            return
        last = tail[-1] if tail else None
        if (
            type(last) is _Run
            and last.flags == flags
            and entry.seq == last.seq + last.count
            and entry.slot == last.slot + last.count
        ):
            last.count += 1
        else:
            tail.append(_Run(entry.seq, entry.slot, flags))

    def appendleft(self, entry: Entry, /) -> None:
        self.head.appendleft(entry)

    def put_back(self, entry: Entry) -> None:
        """A requeued entry goes back to its place by seq. Delivered entries came from
        the head, before anything in the tail, so this stays within the head."""
        while self._tail_len and self._tail[0].seq < entry.seq:
            self.head.append(self._pop_tail())
        insort(self.head, entry)

    # -- taking ---------------------------------------------------------------------------

    def popleft(self) -> Entry:
        if self.head:
            return self.head.popleft()
        if not self._tail_len:
            raise IndexError("pop from an empty queue")
        return self._pop_tail()

    def __getitem__(self, index: int, /) -> Entry:
        if index < 0:
            index += len(self)
        head = self.head
        while len(head) <= index and self._tail_len:
            head.append(self._pop_tail())
        return head[index]

    def _pop_tail(self) -> Entry:
        self._tail_len -= 1
        item = self._tail[0]
        if not isinstance(item, _Run):
            self._tail.popleft()
            return item
        entry = _unpack(item, 0)
        item.seq += 1
        item.slot += 1
        item.count -= 1
        if not item.count:
            self._tail.popleft()
        if self._page_in is not None:
            self._page_in(entry)
        return entry

    def clear(self) -> None:
        self.head.clear()
        self._tail.clear()
        self._tail_len = 0

    def __iter__(self) -> Iterator[Entry]:
        """Every entry in order; those still packed come without message or size."""
        yield from self.head
        for item in self._tail:
            if isinstance(item, _Run):
                for step in range(item.count):
                    yield _unpack(item, step)
            else:
                yield item


def _unpack(run: _Run, step: int) -> Entry:
    entry = Entry(run.seq + step, None)
    entry.slot = run.slot + step
    if run.flags & _REDELIVERED:
        entry.redelivered = True
    if run.flags & _EXPIRY_UNKNOWN:
        entry.expires = UNKNOWN
    return entry
