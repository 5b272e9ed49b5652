"""The classic queue: FIFO of entries, round-robin dispatch to consumers with credit."""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from roost.core.consumer import NO_ARGUMENTS
from roost.core.errors import AccessRefused
from roost.core.features.consumer_choice import (
    check_consumer_arguments,
    chooser_for,
    single_active_argument,
)
from roost.core.features.lifecycle import QueueFeatures
from roost.core.features.settings import QueueSettings
from roost.core.flow import IDLE_FLOW, QueueFlow
from roost.core.message import Message, Properties
from roost.core.queues.entry import Entry
from roost.core.queues.message_path import PAGE_KEEP_BYTES as PAGE_KEEP_BYTES
from roost.core.queues.message_path import PAGE_KEEP_MESSAGES as PAGE_KEEP_MESSAGES
from roost.core.queues.message_path import PAGE_WINDOW, MessagePath
from roost.core.queues.paged import PagedReady

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.consumer import Consumer
    from roost.core.durability import QueueStore
    from roost.core.events_stream import EventsStream
    from roost.core.session import Session
    from roost.core.vhost import VHost


class Ready(Protocol):
    """The ready entries, head first: a deque here, levels in a priority queue."""

    def append(self, entry: Entry, /) -> None: ...
    def appendleft(self, entry: Entry, /) -> None: ...
    def popleft(self) -> Entry: ...
    def clear(self) -> None: ...
    def __getitem__(self, index: int, /) -> Entry: ...
    def __iter__(self) -> Iterator[Entry]: ...
    def __len__(self) -> int: ...


class _NoReady(deque[Entry]):
    """The ready entries of a queue that never had any: one shared empty instance, since
    an empty deque costs ~760 bytes (76 MB for 100,000 idle queues). ``Queue._own_ready``
    swaps in a deque of the queue's own before the first entry; adding to this one
    raises, so a path that forgot to would fail loudly instead of mixing queues."""

    def append(self, entry: Entry, /) -> None:
        raise RuntimeError("entry added to the shared empty ready deque")

    def appendleft(self, entry: Entry, /) -> None:
        raise RuntimeError("entry added to the shared empty ready deque")

    def extend(self, entries: Iterable[Entry], /) -> None:
        raise RuntimeError("entries added to the shared empty ready deque")

    def extendleft(self, entries: Iterable[Entry], /) -> None:
        raise RuntimeError("entries added to the shared empty ready deque")

    def insert(self, index: int, entry: Entry, /) -> None:
        raise RuntimeError("entry added to the shared empty ready deque")


NO_READY = _NoReady()


def add_refusal(so_far: str, queue: Queue) -> str:
    """The reasons of a publish's refusals so far, with ``queue``'s (its push was False)."""
    reason = queue.refusal or f"{queue._where()} refused the message"
    return f"{so_far}; {reason}" if so_far else reason


class Queue(MessagePath):
    """A classic queue; what every message does in it is ``MessagePath``'s (compiled)."""

    # ClassVar: the kinds of queue set these per class (mypyc, compiling the modules
    # that read them, must not take them for instance attributes)
    kind: ClassVar[str] = "classic"
    is_exchange: ClassVar[bool] = False
    stores_all: ClassVar[bool] = False  # durable: persistent messages only (quorum: all)
    counts_deliveries: ClassVar[bool] = False  # x-delivery-count without a delivery limit (quorum)
    entry_class: ClassVar[type[Entry]] = Entry  # a priority queue's entries also carry the priority
    remote: ClassVar[bool] = False  # a cluster's stand-in for a queue homed on another node

    def __init__(
        self,
        vhost: VHost,
        name: str,
        *,
        durable: bool = False,
        exclusive_owner: Client | None = None,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        self.vhost = vhost
        self.name = name
        self.durable = durable
        self.exclusive_owner = exclusive_owner
        self.auto_delete = auto_delete
        self.arguments = arguments or NO_ARGUMENTS
        self.ready = NO_READY  # a deque of its own with the first entry
        self.ready_bytes = 0
        self.consumers: list[Consumer] = []
        # who gets the next message when plain round robin is not enough: consumer
        # priorities or a single active consumer (core.features.consumer_choice)
        self.single_active = single_active_argument(vhost.name, name, self.arguments)
        self.chooser = None
        self.unacked = 0
        self.deleted = False
        self._had_consumer = False
        self._rr = 0
        self._seq = 0
        self.flow = QueueFlow(self)  # congestion: holds publishers while consumers catch up
        cls = type(self)
        self._plain_dispatch = cls.dispatch is Queue.dispatch and cls._offer is Queue._offer
        # lifetime counters for management and metrics
        self.stat_published = 0
        self.stat_delivered = 0
        self.stat_acked = 0
        self.stat_redelivered = 0
        # durable storage (core.durability.QueueStore), set by core.persistence for durable
        # queues; only persistent messages are written to it
        self.store: QueueStore | None = None
        # TTL, length limits, dead-lettering, queue expiry (core/features/lifecycle.py):
        # set when arguments, a policy or a message's expiration call for it
        self.features: QueueFeatures | None = None
        # message mutators from a policy (core.mutators); None: no work per message
        self.mutators = None
        # why the last push returned False, for a publisher that can be told (STOMP)
        self.refusal = ""
        # where this queue's deliveries and acks are recorded (core.events_stream); None:
        # events off, or this queue is the events stream itself
        self.events: EventsStream | None = vhost.events

    @property
    def exclusive(self) -> bool:
        return self.exclusive_owner is not None

    @property
    def message_count(self) -> int:
        return len(self.ready)

    @property
    def last_seq(self) -> int:
        """The sequence number of the last message pushed (its entry's ``seq``)."""
        return self._seq

    # -- incoming -----------------------------------------------------------------------

    def page_out_kept(self) -> int:
        """Memory pressure began: drop the kept messages of stored entries past the first
        ``PAGE_WINDOW`` (they are read back on delivery); how many were dropped. Only a
        classic queue's packed backlog: a priority queue keeps what it has."""
        ready = self.ready
        if not isinstance(ready, PagedReady):
            return 0
        dropped = 0
        for entry in islice(ready.head, PAGE_WINDOW, None):
            if entry.slot and entry.message is not None:
                entry.message = None
                dropped += 1
        return dropped

    def _own_ready(self) -> Ready:
        ready = self.ready
        if ready is NO_READY:
            ready = self.ready = deque()
        return ready

    def _own_flow(self) -> QueueFlow:
        """Its own flow state where it shared the idle one (a subscription queue before
        its first backlog, core/queues/subscription.py)."""
        flow = self.flow
        if flow is IDLE_FLOW:
            flow = self.flow = QueueFlow(self)
        return flow

    def _refuse_mutated(self, message: Message, error: str) -> None:
        """A mutator refused the message: dead-letter it (reason ``rejected``, with
        ``x-mutator-error``) when the queue has a dead-letter exchange."""
        features = self.features
        if features is None or features.settings.dlx is None:
            return
        props = message.properties
        headers = {**(props.headers or {}), "x-mutator-error": error}
        features.dead_letter(message.with_properties(props.replace(headers=headers)), "rejected")

    def _where(self) -> str:
        return f"queue '{self.name}' in vhost '{self.vhost.name}'"

    def _attach_features(self) -> QueueFeatures:
        """Features with no settings: a message's own expiration still needs them."""
        self.features = QueueFeatures(self, QueueSettings())
        return self.features

    def attach_store(self, store: QueueStore) -> None:
        """Persistent messages go to ``store`` from now on; a classic queue's backlog
        packs its paged-out entries into arrays (core.queues.paged)."""
        self.store = store
        if isinstance(self.ready, deque):  # not a priority queue's levels
            ready = deque() if self.ready is NO_READY else self.ready
            self.ready = PagedReady(ready, PAGE_WINDOW, self._page_in)

    def restore(self, slot: int, size: int, redelivered: bool, expires_ms: int = 0) -> None:
        """Put back a message recovered from the store, paged out (no consumers yet);
        ``expires_ms``: its stored absolute deadline (0: none stored)."""
        self._seq += 1
        entry = self._recovered_entry(self._seq, slot, size)
        entry.slot = slot
        entry.redelivered = redelivered
        # before it is packed
        (self.features or self._attach_features()).restored(entry, expires_ms)
        self._own_ready().append(entry)
        self.ready_bytes += entry.size

    def _recovered_entry(self, seq: int, slot: int, size: int) -> Entry:
        return self.entry_class(seq, None, size)

    def _page_in(self, entry: Entry) -> None:
        """Read a paged-out message back from the store before it is handed out."""
        assert self.store is not None
        _seq, _redelivered, exchange, routing_key, props, body = self.store.read(entry.slot)
        entry.message = Message(exchange, routing_key, Properties(*props), body)
        entry.size = len(body)  # a packed entry (core.queues.paged) did not know it

    def _forget(self, entry: Entry) -> None:
        """The entry left the queue for good: release its stored copy."""
        if entry.slot and self.store is not None:
            self.store.remove(entry.slot)

    # -- outgoing -----------------------------------------------------------------------

    def _expired(self, entry: Entry) -> bool:
        """A popped head that expired is dropped (dead-lettered) instead of delivered."""
        return self.features is not None and self.features.expire_popped(entry)

    def take(self) -> Entry | None:
        """Remove the head for basic.get."""
        features = self.features
        if features is not None:
            features.touch()  # basic.get counts as use (x-expires)
        while self.ready:
            entry = self.ready.popleft()
            if entry.expires and self._expired(entry):
                continue
            if entry.message is None:
                self._page_in(entry)
            self.ready_bytes -= entry.size
            self._delivered(entry)
            if features is not None:
                features.drop_expired()  # the count basic.get-ok reports excludes them
            if self.flow.congested:
                self.flow.after_drain()
            return entry
        return None

    # -- settlement ---------------------------------------------------------------------

    def discard(self, entry: Entry) -> None:
        """Rejected without requeue: gone, or dead-lettered when configured."""
        self.unacked -= 1
        if self.features is not None:
            self.features.rejected(entry)
        elif entry.slot:
            self._forget(entry)

    def requeue(self, entries: Iterable[Entry]) -> None:
        """Put delivered entries back at their original position, marked redelivered."""
        if self.deleted:
            return
        if self.features is not None:
            entries = self.features.returned(entries)  # over the delivery limit: dropped
        for entry in sorted(entries, key=lambda e: e.seq, reverse=True):
            self.unacked -= 1
            entry.redelivered = True
            self.ready_bytes += entry.size
            self._put_back(entry)
        self.dispatch()

    def _put_back(self, entry: Entry) -> None:
        """A requeued entry goes back to its original place (by seq) among the ready."""
        ready = self._own_ready()
        if not ready or ready[0].seq > entry.seq:
            ready.appendleft(entry)
        elif isinstance(ready, PagedReady):
            ready.put_back(entry)
        else:
            assert isinstance(ready, deque)  # a queue with another container overrides this
            insort(ready, entry)

    def purge(self) -> int:
        count = len(self.ready)
        if self.store is not None and not self.deleted:  # a deleted queue's files just go
            for entry in self.ready:
                if entry.slot:
                    self._forget(entry)
        self.ready.clear()
        self.ready_bytes = 0
        self.flow.after_drain()
        return count

    # -- consumers ----------------------------------------------------------------------

    def check_available(self) -> None:
        """NotFound when the queue cannot be reached (a cluster's queue whose home node is
        down); a local queue always can."""

    # a cluster's queue homed on another node asks it (a ``Pending`` operation, so the
    # reply that follows waits for the answer); a local queue has everything at hand
    def refresh(self) -> None:
        """Bring ``message_count`` and ``consumer_count`` up to date."""

    def fetch(self) -> None:
        """Have a message ready for basic.get's ``take``."""

    def purged(self, count: int) -> int:
        """purge-ok's count once the purge is done (``count``: what ``purge`` returned)."""
        return count

    @property
    def consumer_count(self) -> int:
        return len(self.consumers)

    def consumed_by_itself(self, session: Session, tag: str) -> Consumer | None:
        """The queue itself as the consumer ``session`` asks for (no ack, no prefetch, no
        options), when it was made to be its own (core/queues/subscription.py); None:
        a consumer of its own is made."""
        return None

    def check_consume(self, exclusive: bool) -> None:
        # RabbitMQ refuses exclusive consumers on a single-active-consumer queue outright
        busy = self.consumers or self.single_active
        if (exclusive and busy) or any(c.is_exclusive() for c in self.consumers):
            raise AccessRefused(
                f"queue '{self.name}' in vhost '{self.vhost.name}' in exclusive use"
            )

    def add_consumer(self, consumer: Consumer) -> None:
        """Register; the caller dispatches once the client has been told (consume-ok)."""
        check_consumer_arguments(self, consumer.arguments)
        self.consumers.append(consumer)
        self._had_consumer = True
        if self.features is not None:
            self.features.touch()
        self.chooser = chooser_for(self)

    def remove_consumer(self, consumer: Consumer) -> None:
        """Forget a consumer; an auto-delete queue goes when its last consumer leaves."""
        if consumer not in self.consumers:
            return
        was_active = self.single_active and self.consumers[0] is consumer
        self.consumers.remove(consumer)
        self.chooser = chooser_for(self)
        self.flow.after_drain()  # no consumers left: nobody to wait for
        if self.features is not None:
            self.features.touch()
        if self.auto_delete and self._had_consumer and not self.consumers and not self.deleted:
            self.vhost.delete_queue(self)
        elif was_active and self.consumers and not self.deleted:
            self.dispatch()  # the next consumer in line takes over at once

    def consumer_active(self, consumer: Consumer) -> bool:
        """False for a single-active-consumer queue's waiting consumers."""
        return self.chooser is None or self.chooser.is_active(consumer)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} vhost={self.vhost.name!r} ready={len(self.ready)}>"
