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
    Chooser,
    check_consumer_arguments,
    chooser_for,
    single_active_argument,
)
from roost.core.features.lifecycle import QueueFeatures
from roost.core.features.settings import QueueSettings
from roost.core.features.ttl import wall_ms
from roost.core.flow import QueueFlow
from roost.core.message import Message, Properties
from roost.core.mutators import Chain, MutationRefused
from roost.core.queues.entry import Entry
from roost.core.queues.paged import PagedReady

# A durable queue keeps the messages of its first ready entries in memory, up to
# PAGE_KEEP_MESSAGES and PAGE_KEEP_BYTES of bodies (PAGE_WINDOW under memory pressure);
# persistent messages queued behind them live only in the store (and, packed, in
# PagedReady's arrays) and are read back for delivery. The limits sit above the flow
# watermark (core.flow's 10,000 messages), so a queue whose consumers keep up, held at
# that watermark, delivers from memory: with the window at 1,024 every delivery of
# such a queue was a read (the durable benchmark lost a third of its rate to it).
PAGE_WINDOW = 1024
PAGE_KEEP_MESSAGES = 16_384
PAGE_KEEP_BYTES = 16 * 1024 * 1024

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


class Queue:
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
        self.ready: Ready = NO_READY  # a deque of its own with the first entry
        self.ready_bytes = 0
        self.consumers: list[Consumer] = []
        # who gets the next message when plain round robin is not enough: consumer
        # priorities or a single active consumer (core.features.consumer_choice)
        self.single_active = single_active_argument(vhost.name, name, self.arguments)
        self.chooser: Chooser | None = None
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
        self.mutators: Chain | None = None
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

    def push(self, message: Message) -> bool:
        """Enqueue or deliver; False when the queue refused it (overflow reject-publish,
        a message mutator)."""
        if self.mutators is not None:
            try:
                mutated = self.mutators.run(message)
            except MutationRefused as exc:
                self._refuse_mutated(message, exc.error)
                self.refusal = f"message refused by {self._where()}: {exc.error}"
                return False
            if mutated is None:
                return True  # dropped by a mutator: taken, and gone
            message = mutated
        self._seq += 1
        entry = self.entry_class(self._seq, message)
        features = self.features
        if features is None and message.properties.expiration is not None:
            features = self._attach_features()
        if features is not None and not features.admit(entry):
            self.refusal = f"{self._where()} is full (overflow {features.settings.overflow})"
            return False
        self.stat_published += 1
        if self.store is not None and (message.properties.delivery_mode == 2 or self.stores_all):
            entry.slot = self.store.append(
                message.exchange,
                message.routing_key,
                message.properties.as_tuple(),
                message.body,
                expires_ms=wall_ms(entry.expires) if entry.expires else 0,
            )
        elif len(self.ready) >= PAGE_WINDOW and (pager := self.vhost.pager).active:
            # memory pressure: a transient message behind the window goes to disk too
            entry.slot = pager.store_for(self).append(
                message.exchange,
                message.routing_key,
                message.properties.as_tuple(),
                message.body,
                transient=True,
            )
            pager.paged += 1
        if self.ready or not self._offer(entry):
            ready = self._own_ready()
            if entry.slot and self._pages_out(len(ready)):
                entry.message = None  # paged out: see _page_in
            ready.append(entry)
            self.ready_bytes += entry.size
            self.flow.after_push()
            if features is not None:
                features.enqueued(entry)
        return True

    def _pages_out(self, ready: int) -> bool:
        """Whether a stored message joining ``ready`` others leaves memory now."""
        if ready >= PAGE_KEEP_MESSAGES or self.ready_bytes >= PAGE_KEEP_BYTES:
            return True
        return ready >= PAGE_WINDOW and self.vhost.pager.active

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

    def _offer(self, entry: Entry) -> bool:
        """Hand the entry to the next consumer with credit, round robin."""
        chooser = self.chooser
        if chooser is not None:
            chosen = chooser.pick()
            if chosen is None:
                return False
            self._delivered(entry)
            chosen.session.deliver(chosen, self, entry)
            return True
        consumers = self.consumers
        n = len(consumers)
        for _ in range(n):
            consumer = consumers[self._rr % n]
            self._rr += 1
            if consumer.has_credit():
                self._delivered(entry)
                consumer.session.deliver(consumer, self, entry)
                return True
        return False

    def dispatch(self) -> None:
        """Deliver ready entries while some consumer has credit."""
        ready = self.ready
        while ready and self.consumers:
            entry = ready.popleft()
            if entry.expires and self._expired(entry):
                continue
            if entry.message is None:
                self._page_in(entry)
            if not self._offer(entry):
                ready.appendleft(entry)
                break
            self.ready_bytes -= entry.size
        if self.features is not None:
            self.features.drop_expired()
        if self.flow.congested:
            self.flow.after_drain()

    def _expired(self, entry: Entry) -> bool:
        """A popped head that expired is dropped (dead-lettered) instead of delivered."""
        return self.features is not None and self.features.expire_popped(entry)

    def dispatch_to(self, consumer: Consumer) -> None:
        """Credit came back to one consumer (it acked): feed it from the backlog.

        While a queue has ready entries no other consumer has credit, because every
        change that gives credit (ack, qos, consume, flow, a writable socket) dispatches;
        so skipping the round robin here is fair, and it halves the cost of an ack in
        bench scenario 3 (each ``_offer`` asked every consumer for credit).
        """
        if not self._plain_dispatch or self.chooser is not None:  # not plain round robin
            self.dispatch()
            return
        ready = self.ready
        if not ready or self.deleted:
            return
        if consumer.session.consumers.get(consumer.tag) is not consumer:
            return  # cancelled meanwhile
        while consumer.has_credit() and ready:  # credit first: it usually ends the loop
            entry = ready.popleft()
            if entry.expires and self._expired(entry):
                continue
            if entry.message is None:
                self._page_in(entry)
            self.ready_bytes -= entry.size
            self._delivered(entry)
            consumer.session.deliver(consumer, self, entry)
        if self.features is not None:
            self.features.drop_expired()
        if self.flow.congested:
            self.flow.after_drain()

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

    def _delivered(self, entry: Entry) -> None:
        entry.deliveries += 1
        if entry.slot and entry.deliveries == 1 and self.store is not None:
            self.store.mark_delivered(entry.slot)
        if self.features is not None:
            self.features.delivered(entry)
        self.unacked += 1
        self.stat_delivered += 1
        if entry.redelivered:
            self.stat_redelivered += 1

    # -- settlement ---------------------------------------------------------------------

    def settle(self, entry: Entry) -> None:
        """The entry was acknowledged (or delivered without ack): it leaves the queue."""
        self.unacked -= 1
        self.stat_acked += 1
        if entry.slot:
            self._forget(entry)

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
