"""PagedReady: a durable queue's ready entries with the tail packed into runs.

Every sequence of operations must give the same entries, in the same order, as a plain
deque of ``Entry`` objects (the container it replaces). A packed entry's size comes back
from ``page_in`` (the queue's read from its store): here a map from slot to size.
"""

from __future__ import annotations

from bisect import insort
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.core.features.lifecycle import UNKNOWN
from roost.core.message import Message, Properties
from roost.core.queues.entry import Entry
from roost.core.queues.paged import PagedReady

WINDOW = 4


def view(entry: Entry) -> tuple[object, ...]:
    return (entry.seq, entry.slot, entry.size, entry.redelivered, entry.expires,
            entry.deliveries, entry.message)


class Source:
    """Makes entries the way a queue does: seq for each push, a slot for stored ones."""

    def __init__(self) -> None:
        self.seq = 0
        self.slot = 0
        self.sizes: dict[int, int] = {}  # what the store would read back

    def page_in(self, entry: Entry) -> None:
        entry.size = self.sizes[entry.slot]

    def make(self, kind: str, size: int) -> Entry:
        self.seq += 1
        if kind == "transient":  # message in memory, not stored
            return Entry(self.seq, Message("", "k", Properties(), b"x" * size))
        self.slot += 1 if kind != "gap" else 2
        entry = Entry(self.seq, None, size)
        entry.slot = self.slot
        self.sizes[self.slot] = size
        if kind == "recovered":
            entry.expires = UNKNOWN
            entry.redelivered = True
        elif kind == "deadline":
            entry.expires = 123.5
        return entry


ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"),
                  st.sampled_from(["stored", "stored", "stored", "gap", "transient",
                                   "recovered", "deadline"]),
                  st.integers(0, 5000)),
        st.tuples(st.just("pop"), st.just(""), st.just(0)),
        st.tuples(st.just("head"), st.just(""), st.just(0)),
        st.tuples(st.just("requeue"), st.just(""), st.just(0)),
    ),
    max_size=300,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_behaves_like_a_deque(script: list[tuple[str, str, int]]) -> None:
    source = Source()
    paged = PagedReady(window=WINDOW, page_in=source.page_in)
    model: deque[Entry] = deque()
    taken: list[Entry] = []
    for op, kind, size in script:
        if op == "append":
            entry = source.make(kind, size)
            paged.append(entry)
            model.append(entry)
        elif op == "pop" and model:
            got, want = paged.popleft(), model.popleft()
            assert view(got) == view(want)
            got.deliveries = want.deliveries = 1
            taken.append(got)
        elif op == "head" and model:
            assert view(paged[0]) == view(model[0])
        elif op == "requeue" and taken:
            entry = taken.pop()  # delivered entries come back, newest first, as requeue does
            entry.redelivered = True
            if not model or model[0].seq > entry.seq:
                paged.appendleft(entry)
                model.appendleft(entry)
            else:
                paged.put_back(entry)
                insort(model, entry)
        assert len(paged) == len(model)
        assert bool(paged) == bool(model)
    # iterating does not read: packed entries come without their size
    assert [view(e)[:2] for e in paged] == [view(e)[:2] for e in model]
    while model:
        assert view(paged.popleft()) == view(model.popleft())
    assert not paged and len(paged) == 0


def test_a_long_backlog_is_packed_and_comes_back_in_order() -> None:
    """200,000 paged-out entries: nothing per entry, one run per gap in the slots."""
    source = Source()
    paged = PagedReady(window=WINDOW, page_in=source.page_in)
    for i in range(200_000):
        paged.append(source.make("gap" if i % 50_000 == 0 else "stored", 1000 + i % 7))
    assert paged.tail_length == 200_000 - WINDOW
    assert len(paged._tail) <= 5  # one run per gap in the slots, not one per entry
    expected = Source()
    for i in range(200_000):
        want = expected.make("gap" if i % 50_000 == 0 else "stored", 1000 + i % 7)
        got = paged.popleft()
        assert (got.seq, got.slot, got.size) == (want.seq, want.slot, want.size)
    assert len(paged) == 0 and not paged._tail


def test_clear_empties_head_and_tail() -> None:
    source = Source()
    paged = PagedReady(window=WINDOW)
    for _ in range(20):
        paged.append(source.make("stored", 10))
    paged.clear()
    assert len(paged) == 0 and list(paged) == []
    paged.append(source.make("stored", 10))
    assert paged.popleft().seq == 21


def test_recovered_entries_keep_their_flags_and_unknown_deadline() -> None:
    """Recovery's entries (redelivered, deadline unread) are packed and come back so."""
    source = Source()
    paged = PagedReady(window=WINDOW, page_in=source.page_in)
    entries = [source.make("recovered", 7) for _ in range(WINDOW + 10)]
    for entry in entries:
        paged.append(entry)
    assert paged.tail_length == 10
    assert [view(paged.popleft()) for _ in entries] == [view(e) for e in entries]
