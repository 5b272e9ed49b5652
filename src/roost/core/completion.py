"""The one durability wait: ``Completion`` tells when what changed since it was taken is
on disk (the ``MessageStore``'s group commit) and every operation decided elsewhere in
that time (``Pending``: a cluster's etcd transaction, a home node's confirm, a replicated
queue's majority) has finished, with the first error (docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roost.core.durability import MessageStore
    from roost.core.errors import BrokerError

Done = Callable[["BrokerError | None"], None]


class Pending:
    """Operations whose outcome is decided elsewhere: a cluster's definition changes
    (an etcd transaction), messages forwarded to the node their queue lives on (the
    home node's confirm) and a replicated queue's majority. Each gets a number from
    ``issue`` and ends with ``finish``; ``when_done`` waits for the operations issued in
    a range, and only for those: a publish's confirm waits for every queue it reached
    and for nothing another publish started (a congested queue on another node whose
    answers are deferred holds only its own publishers' confirms, as in RabbitMQ, which
    confirms a message once all its queues have it). On a single node nothing is ever
    issued, so a ``Completion`` pays one integer comparison for it."""

    __slots__ = ("_failed", "_unfinished", "issued")

    def __init__(self) -> None:
        self.issued = 0
        # number -> the waiters for it (None: nobody waits yet)
        self._unfinished: dict[int, list[_Waiter] | None] = {}
        self._failed: dict[int, BrokerError] = {}  # the last few failures, by number

    def issue(self) -> int:
        self.issued += 1
        self._unfinished[self.issued] = None
        return self.issued

    def finish(self, number: int, error: BrokerError | None = None) -> None:
        unfinished = self._unfinished
        if number not in unfinished:
            return  # finished twice (a link that went down after the answer): ignore
        waiters = unfinished.pop(number)
        if error is not None:
            self._failed[number] = error
            while len(self._failed) > 4096:
                del self._failed[next(iter(self._failed))]
        if waiters is not None:
            for waiter in waiters:
                waiter.one_done(number, error)

    def when_done(self, after: int, upto: int, done: Done) -> None:
        """``done`` once every operation numbered in (``after``, ``upto``] finished: with
        the failure of the lowest-numbered one that failed, or None. At once (before
        this returns) when they all have."""
        unfinished = self._unfinished
        if upto == after + 1:  # one operation (a publish forwarded to one queue)
            if upto not in unfinished:
                done(self._failed.get(upto))
                return
            waiter = _Waiter(done, 1, None)
            listed = unfinished[upto]
            if listed is None:
                unfinished[upto] = [waiter]
            else:
                listed.append(waiter)
            return
        if upto - after <= len(unfinished):
            waiting = [n for n in range(after + 1, upto + 1) if n in unfinished]
        else:  # a wide range (a caller that awaited between its marks): scan the few
            waiting = [n for n in unfinished if after < n <= upto]
        error = None
        failures = self._failed
        if failures:
            if upto - after <= len(failures):
                failed = [n for n in range(after + 1, upto + 1) if n in failures]
            else:
                failed = [n for n in failures if after < n <= upto]
            if failed:
                first = min(failed)
                error = (first, failures[first])
        if not waiting:
            done(None if error is None else error[1])
            return
        waiter = _Waiter(done, len(waiting), error)
        for number in waiting:
            listed = unfinished[number]
            if listed is None:
                unfinished[number] = [waiter]
            else:
                listed.append(waiter)


class _Waiter:
    """One ``when_done``: the operations of its range still unfinished, and the first
    failure among its operations (by number, the order they were issued)."""

    __slots__ = ("_done", "_error", "_left")

    def __init__(self, done: Done, left: int, error: tuple[int, BrokerError] | None) -> None:
        self._done = done
        self._left = left
        self._error = error

    def one_done(self, number: int, error: BrokerError | None) -> None:
        if error is not None and (self._error is None or number < self._error[0]):
            self._error = (number, error)
        self._left -= 1
        if self._left == 0:
            self._done(None if self._error is None else self._error[1])


class Completion:
    """"Do this; tell me when it is durable (or that it failed)": the one way anything
    waits for the store. Take one before an operation (``Broker.durable_from_here``), run
    the operation, then ``then(done)``: ``done(None)`` once everything the operation
    changed durably (a journaled definition, a persistent message) is on disk, or
    ``done(error)`` when it could not be. A cluster's definitions authority completes the
    same way once etcd committed the change (``Pending``), with the error a commit-time
    check found (a 406 from a racing declare)."""

    __slots__ = ("_mark", "_pending", "_pending_mark", "_store")

    def __init__(
        self,
        store: MessageStore,
        pending: Pending | None = None,
        *,
        marks: tuple[int, int] | None = None,
    ) -> None:
        """``marks``: (store appends, pending issued) taken earlier, for a caller that
        learns only afterwards that it must wait (a publish that was forwarded)."""
        self._store = store
        self._pending = pending
        if marks is not None:
            self._mark, self._pending_mark = marks
        else:
            self._mark = store.appends
            self._pending_mark = 0 if pending is None else pending.issued

    @property
    def pending(self) -> bool:
        """Something durable changed since this was taken."""
        if self._pending is not None and self._pending.issued != self._pending_mark:
            return True
        return self._store.appends != self._mark

    def then(self, done: Done) -> bool:
        """True: ``done`` will be called once it is durable. False: nothing durable
        changed, ``done`` is not called and the caller replies at once (the synchronous
        path: a non-durable declare never waits)."""
        store = self._store
        remote = self._pending
        if remote is not None and remote.issued != self._pending_mark:
            if store.appends == self._mark:
                remote.when_done(self._pending_mark, remote.issued, done)
            else:
                both = _Both(done)
                store.when_durable(partial(_completed, both.one))
                remote.when_done(self._pending_mark, remote.issued, both.one)
            return True
        if store.appends == self._mark:
            return False
        store.when_durable(partial(_completed, done))
        return True


class _Both:
    """Calls ``done`` once both halves answered, with the first error either gave."""

    __slots__ = ("_done", "_error", "_left")

    def __init__(self, done: Done) -> None:
        self._done = done
        self._left = 2
        self._error: BrokerError | None = None

    def one(self, error: BrokerError | None) -> None:
        if error is not None and self._error is None:
            self._error = error
        self._left -= 1
        if self._left == 0:
            self._done(self._error)


def _completed(done: Done, ok: bool) -> None:
    from roost.core.errors import InternalError

    done(None if ok else InternalError("the change could not be written to disk"))
