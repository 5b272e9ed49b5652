"""What every message does in a queue, compiled (docs/compiled.md): push, the round robin
offer, dispatch, delivery accounting and settlement.

``MessagePath`` is the base of ``Queue`` (core/queues/base.py, interpreted). It is a
native class when compiled, holding only the fields these steps write per message
(``_seq``, ``ready``, ``ready_bytes``, ``unacked``, the counters, ``deleted``,
``chooser``, ``mutators``), which are also the ones every queue keeps per instance: so
``SubscriptionQueue``, which reads the rest of a queue (``durable``, ``store``,
``features``, ...) from its class to stay small (issue 19), keeps that layout, and costs
no more memory than with these fields in its ``__slots__``. Everything else a ``Queue``
has is read here through ``q`` (``self`` typed as ``Queue``), a Python attribute access,
so a subclass may still override it with a class attribute or a property.

The seven kinds of queue are interpreted subclasses (``allow_interpreted_subclasses``);
their overrides of these methods (a stream's ``push``, a quorum queue's ``_delivered``,
a subscription queue's ``_offer``) are called wherever these methods call them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, cast

from mypy_extensions import mypyc_attr

from roost.core.features.ttl import wall_ms
from roost.core.flow import IDLE_FLOW
from roost.core.mutators import MutationRefused
from roost.core.queues.entry import Entry

if TYPE_CHECKING:
    from roost.core.consumer import Consumer
    from roost.core.features.consumer_choice import Chooser
    from roost.core.message import Message
    from roost.core.mutators import Chain
    from roost.core.queues.base import Queue, Ready

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


# Which steps a queue class overrides (bits), by class. Every queue is an interpreted
# subclass of the compiled MessagePath, and a compiled method calling another on such an
# object goes through mypyc's glue: a Python-level method lookup and call. Where the
# class keeps MessagePath's step, it is called here as a native function instead.
_OFFER: Final = 1
_DELIVERED: Final = 2
_PUSH: Final = 4
_STEPS: Final = (("_offer", _OFFER), ("_delivered", _DELIVERED), ("push", _PUSH))
_OVERRIDES: Final[dict[type, int]] = {}


def _overrides(cls: type) -> int:
    found = _OVERRIDES.get(cls)
    if found is None:
        found = 0
        for name, bit in _STEPS:
            if getattr(cls, name) is not getattr(MessagePath, name):
                found |= bit
        _OVERRIDES[cls] = found
    return found


@mypyc_attr(allow_interpreted_subclasses=True)
class MessagePath:
    # slots in the pure build too, so that a subscription queue keeps no instance dict
    __slots__ = (
        "_seq",
        "chooser",
        "deleted",
        "mutators",
        "ready",
        "ready_bytes",
        "stat_acked",
        "stat_delivered",
        "stat_published",
        "unacked",
    )
    # set by Queue.__init__ and SubscriptionQueue.__init__ (no defaults: a native field
    # with a class-level default cannot be read from the class by a subclass)
    ready: Ready  # the ready entries, head first (a shared empty one until the first)
    ready_bytes: int
    unacked: int
    deleted: bool
    _seq: int
    # who gets the next message when plain round robin is not enough: consumer
    # priorities or a single active consumer (core.features.consumer_choice)
    chooser: Chooser | None
    # message mutators from a policy (core.mutators); None: no work per message
    mutators: Chain | None
    # lifetime counters for management and metrics
    stat_published: int
    stat_delivered: int
    stat_acked: int

    # -- incoming -----------------------------------------------------------------------

    def push(self, message: Message) -> bool:
        """Enqueue or deliver; False when the queue refused it (overflow reject-publish,
        a message mutator)."""
        return _push(self, message)

    def _pages_out(self, ready: int) -> bool:
        """Whether a stored message joining ``ready`` others leaves memory now."""
        if ready >= PAGE_KEEP_MESSAGES or self.ready_bytes >= PAGE_KEEP_BYTES:
            return True
        return ready >= PAGE_WINDOW and cast("Queue", self).vhost.pager.alarms.paging

    # -- outgoing -----------------------------------------------------------------------

    def _offer(self, entry: Entry) -> bool:
        """Hand the entry to the next consumer with credit, round robin."""
        return _offer(self, entry)

    def dispatch(self) -> None:
        """Deliver ready entries while some consumer has credit."""
        q = cast("Queue", self)
        own_offer = not _overrides(type(self)) & _OFFER
        ready = self.ready
        while ready and q.consumers:
            entry = ready.popleft()
            if entry.expires and q._expired(entry):
                continue
            if entry.message is None:
                q._page_in(entry)
            if not (_offer(self, entry) if own_offer else self._offer(entry)):
                ready.appendleft(entry)
                break
            self.ready_bytes -= entry.size
        _after_dispatch(q)

    def dispatch_to(self, consumer: Consumer) -> None:
        """Credit came back to one consumer (it acked): feed it from the backlog.

        While a queue has ready entries no other consumer has credit, because every
        change that gives credit (ack, qos, consume, flow, a writable socket) dispatches;
        so skipping the round robin here is fair, and it halves the cost of an ack in
        bench scenario 3 (each ``_offer`` asked every consumer for credit).
        """
        q = cast("Queue", self)
        if not q._plain_dispatch or self.chooser is not None:  # not plain round robin
            self.dispatch()
            return
        ready = self.ready
        if not ready or self.deleted:
            return
        session = consumer.session
        if session.consumers.get(consumer.tag) is not consumer:
            return  # cancelled meanwhile
        own_delivered = not _overrides(type(self)) & _DELIVERED
        while session.credit_for(consumer) and ready:  # credit first: it usually ends it
            entry = ready.popleft()
            if entry.expires and q._expired(entry):
                continue
            if entry.message is None:
                q._page_in(entry)
            self.ready_bytes -= entry.size
            if own_delivered:
                _delivered(self, entry)
            else:
                self._delivered(entry)
            session.deliver(consumer, q, entry)
        _after_dispatch(q)

    def _delivered(self, entry: Entry) -> None:
        _delivered(self, entry)

    # -- settlement ---------------------------------------------------------------------

    def settle(self, entry: Entry) -> None:
        """The entry was acknowledged (or delivered without ack): it leaves the queue."""
        self.unacked -= 1
        self.stat_acked += 1
        if entry.slot:
            cast("Queue", self)._forget(entry)


def push_into(mp: MessagePath, message: Message) -> bool:
    """``mp.push(message)``, a native call where the queue's class keeps MessagePath's
    (the router's call for every message and target queue; see ``_overrides``)."""
    if _overrides(type(mp)) & _PUSH:
        return mp.push(message)
    return _push(mp, message)


def _push(mp: MessagePath, message: Message) -> bool:
    """MessagePath.push's body (called natively by ``push_into``)."""
    q = cast("Queue", mp)
    if mp.mutators is not None:
        try:
            mutated = mp.mutators.run(message)
        except MutationRefused as exc:
            q._refuse_mutated(message, exc.error)
            q.refusal = f"message refused by {q._where()}: {exc.error}"
            return False
        if mutated is None:
            return True  # dropped by a mutator: taken, and gone
        message = mutated
    mp._seq += 1
    entry_class = q.entry_class
    # the plain Entry through its native constructor: calling the class object took
    # the Python-level call and keyword parsing (1% of AMQP 1/1 16 B)
    entry = Entry(mp._seq, message) if entry_class is Entry else entry_class(mp._seq, message)
    features = q.features
    if features is None and message.properties.expiration is not None:
        features = q._attach_features()
    if features is not None and not features.admit(entry):
        q.refusal = f"{q._where()} is full (overflow {features.settings.overflow})"
        return False
    mp.stat_published += 1
    store = q.store
    if store is not None and (message.properties.delivery_mode == 2 or q.stores_all):
        entry.slot = store.append(
            message.exchange,
            message.routing_key,
            message.properties.as_tuple(),
            message.body,
            expires_ms=wall_ms(entry.expires) if entry.expires else 0,
        )
    elif len(mp.ready) >= PAGE_WINDOW and (pager := q.vhost.pager).alarms.paging:
        # memory pressure: a transient message behind the window goes to disk too
        entry.slot = pager.store_for(q).append(
            message.exchange,
            message.routing_key,
            message.properties.as_tuple(),
            message.body,
            transient=True,
        )
        pager.paged += 1
    if mp.ready:
        offered = False
    elif _overrides(type(mp)) & _OFFER:
        offered = mp._offer(entry)
    else:
        offered = _offer(mp, entry)
    if not offered:
        ready = mp.ready
        if not ready:  # maybe the shared empty one: Queue._own_ready makes its own
            ready = q._own_ready()
        if entry.slot and mp._pages_out(len(ready)):
            entry.message = None  # paged out: see Queue._page_in
        ready.append(entry)
        mp.ready_bytes += entry.size
        flow = q.flow
        if flow is IDLE_FLOW:  # maybe a subscription queue's first backlog
            flow = q._own_flow()
        flow.after_push()
        if features is not None:
            features.enqueued(entry)
    return True


def _offer(mp: MessagePath, entry: Entry) -> bool:
    """MessagePath._offer's body: hand the entry to the next consumer with credit, round
    robin."""
    chooser = mp.chooser
    if chooser is not None:
        chosen = chooser.pick()
        if chosen is None:
            return False
        _deliver_step(mp, entry)
        chosen.session.deliver(chosen, cast("Queue", mp), entry)
        return True
    q = cast("Queue", mp)
    consumers = q.consumers
    n = len(consumers)
    for _ in range(n):
        turn = q._rr
        consumer = consumers[turn % n]
        q._rr = turn + 1
        if consumer.session.credit_for(consumer):
            _deliver_step(mp, entry)
            consumer.session.deliver(consumer, q, entry)
            return True
    return False


def _deliver_step(mp: MessagePath, entry: Entry) -> None:
    if _overrides(type(mp)) & _DELIVERED:
        mp._delivered(entry)
    else:
        _delivered(mp, entry)


def _delivered(mp: MessagePath, entry: Entry) -> None:
    """MessagePath._delivered's body."""
    q = cast("Queue", mp)
    deliveries = entry.deliveries + 1
    entry.deliveries = deliveries
    if entry.slot and deliveries == 1:
        store = q.store
        if store is not None:
            store.mark_delivered(entry.slot)
    features = q.features
    if features is not None:
        features.delivered(entry)
    mp.unacked += 1
    mp.stat_delivered += 1
    if entry.redelivered:
        q.stat_redelivered += 1


def _after_dispatch(q: Queue) -> None:
    """What a dispatch ends with: expired heads dropped, a congested flow told."""
    features = q.features
    if features is not None:
        features.drop_expired()
    flow = q.flow
    if flow.congested:
        flow.after_drain()
