"""core.completion.Pending: a waiter waits for the operations of its own range only, and
hears the first failure among them (by number)."""

from __future__ import annotations

from roost.core.completion import Pending
from roost.core.errors import BrokerError, InternalError


def test_a_waiter_is_not_held_by_an_earlier_unfinished_operation() -> None:
    pending = Pending()
    congested = pending.issue()  # another publish's, answered much later
    mine = pending.issue()
    heard: list[BrokerError | None] = []
    pending.when_done(congested, mine, heard.append)
    assert heard == []
    pending.finish(mine)
    assert heard == [None]  # while ``congested`` is still unfinished
    pending.finish(congested)
    assert heard == [None]


def test_a_waiter_waits_for_every_operation_of_its_range() -> None:
    pending = Pending()
    first, second, third = pending.issue(), pending.issue(), pending.issue()
    heard: list[BrokerError | None] = []
    pending.when_done(0, third, heard.append)
    pending.finish(third)
    pending.finish(first)
    assert heard == []
    pending.finish(second)
    assert heard == [None]
    assert pending.issued == 3 and first == 1 and second == 2


def test_the_first_failure_of_the_range_by_number_is_reported() -> None:
    pending = Pending()
    numbers = [pending.issue() for _ in range(4)]
    early = InternalError("early")
    pending.finish(numbers[0], InternalError("outside the range"))
    pending.finish(numbers[2], early)  # finished before the waiter came
    heard: list[BrokerError | None] = []
    pending.when_done(numbers[0], numbers[3], heard.append)
    pending.finish(numbers[3], InternalError("late"))
    pending.finish(numbers[1], InternalError("lowest"))
    assert len(heard) == 1 and heard[0] is not None and heard[0].text == "lowest"
    done_already: list[BrokerError | None] = []
    pending.when_done(numbers[1], numbers[3], done_already.append)  # at once
    assert done_already == [early]


def test_overlapping_waiters_and_a_second_finish() -> None:
    pending = Pending()
    a, b = pending.issue(), pending.issue()
    wide: list[BrokerError | None] = []
    narrow: list[BrokerError | None] = []
    pending.when_done(0, b, wide.append)
    pending.when_done(a, b, narrow.append)
    pending.finish(b)
    assert narrow == [None] and wide == []
    pending.finish(b, InternalError("twice"))  # ignored
    pending.finish(a)
    assert wide == [None] and narrow == [None]
    empty: list[BrokerError | None] = []
    pending.when_done(b, b, empty.append)  # an empty range: at once
    assert empty == [None]


def test_a_range_of_one_operation_finished_or_not() -> None:
    """The one-operation range (every publish forwarded to one queue) takes a shorter
    path: it still hears a failure that came before it waited, and shares the operation
    with other waiters."""
    pending = Pending()
    failed, later = pending.issue(), pending.issue()
    pending.finish(failed, InternalError("lost"))
    heard: list[BrokerError | None] = []
    pending.when_done(failed - 1, failed, heard.append)
    assert len(heard) == 1 and str(heard[0]) == "lost"
    pending.when_done(failed, later, heard.append)
    pending.when_done(failed, later, heard.append)
    pending.finish(later)
    assert heard[1:] == [None, None]
