"""The queue of one topic subscription, kept in less memory.

A STOMP SUBSCRIBE to a topic (``/topic/…``, ``/exchange/…``) gets an exclusive,
auto-delete queue of its own, bound to the exchange, with one consumer: RabbitMQ does
the same and shows that queue in its management API, and so does Roost. Brokers with
100,000 such subscriptions are common (bench/rss_bench.py), most of them idle, so this
queue keeps only what a classic queue writes, in slots, and makes its flow-control
state at its first backlog:

* a classic ``Queue`` is ~500 bytes before its first message (an instance dict of 27
  attributes, 312; a ``QueueFlow`` and its weak reference, 192); this one is ~200;
* what such a queue never changes (not durable, auto-delete, no arguments, no store, no
  policy features until a policy or a message TTL gives it some) is read from the class;
  what every such queue writes is a slot (tests/stomp/test_subscription_queue.py checks
  that a delivery and an ack leave the instance dict empty).

It is a ``Queue`` in every other respect (routing, dispatch, acks, requeues, flow
control once it has a backlog, management listing and deletion), so nothing that
handles queues needs to know it exists. Anything else written to it later (a policy's
features or mutators, a refusal) goes to the instance dict every Python object of a
``Queue`` subclass still has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.core.consumer import NO_ARGUMENTS, Consumer
from roost.core.features.consumer_choice import check_consumer_arguments, chooser_for
from roost.core.flow import IDLE_FLOW, QueueFlow
from roost.core.queues.base import NO_READY, Queue

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.events_stream import EventsStream
    from roost.core.exchanges.base import Binding
    from roost.core.queues.entry import Entry
    from roost.core.session import Session
    from roost.core.vhost import VHost


class SubscriptionQueue(Queue, Consumer):  # type: ignore[misc, override, unused-ignore]  # (see below)
    """A queue, and its own consumer when its subscriber neither acks nor has a prefetch
    (``consumed_by_itself``): an ack:auto topic subscription is then this one object, no
    ``Consumer`` and no consumer list (~130 bytes less each); a client-ack subscription's
    one consumer is kept without a list too (~96 bytes). It answers to both roles:
    ``exclusive``, ``arguments`` and ``unacked`` are the queue's (an exclusive queue, no
    arguments; a no-ack consumer reads no ``unacked``), ``is_exclusive`` the consumer's
    (not exclusive), ``queue`` is itself. mypy sees the two roles' attributes clash."""

    # (with the fields every queue writes per message, which MessagePath keeps: _seq,
    # chooser, deleted, mutators, ready, ready_bytes, stat_acked/delivered/published, unacked)
    __slots__ = (
        "_bindings",
        "_consumers",
        "_own",
        "exclusive_owner",
        "flow",
        "name",
        "session",
        "tag",
        "vhost",
    )
    # what such a queue never changes, read from the class
    durable = False
    auto_delete = True
    arguments: dict[str, Any] = NO_ARGUMENTS
    single_active = False
    store = None
    features = None
    refusal = ""
    # a redelivery (a requeue, a reconnect) is rare for a topic subscription: its first
    # writes this to the instance's dict, whose inline values 3.11 allocates anyway, and
    # each queue keeps 8 bytes less (with the three properties below, 32 in RSS)
    stat_redelivered = 0
    _plain_dispatch = True  # dispatch is Queue's, and _offer its round robin
    no_ack = True  # as its own consumer

    def __init__(  # Queue's signature, for VHost.declare_queue
        self,
        vhost: VHost,
        name: str,
        *,
        durable: bool = False,
        exclusive_owner: Client | None = None,
        auto_delete: bool = True,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        # deliberately not Queue.__init__: it would write every attribute per instance
        assert not durable and auto_delete and not arguments, "a plain subscription queue"
        self.vhost = vhost
        self.name = name
        self.exclusive_owner = exclusive_owner
        self.ready = NO_READY
        self.ready_bytes = 0
        # its consumers: itself alone while _consumers is None and _own is set; one other
        # (a client-ack subscription's) kept alone, without a list (96 bytes in RSS); else
        # the list (a second consumer: the connection consuming /amq/queue/<its name>)
        self._own = False
        self._consumers: list[Consumer] | Consumer | None = None
        self.unacked = 0
        self.deleted = False
        self._seq = 0
        # the shared idle flow state until its first backlog (Queue._own_flow)
        self.flow: QueueFlow = IDLE_FLOW
        self.chooser = None  # both written at every declare and consumer change
        self.mutators = None
        # its bindings (one, as a rule), so that ending it scans no other queue's
        # (VHost._bindings_to)
        self._bindings: Binding | list[Binding] | None = None
        self.stat_published = 0
        self.stat_delivered = 0
        self.stat_acked = 0

    # -- as its own consumer ----------------------------------------------------------------

    def consumed_by_itself(self, session: Session, tag: str) -> Consumer | None:
        if self._own or self._consumers is not None or self.deleted:
            return None  # consumed already: the next consumer is one of its own
        self.session = session
        self.tag = tag
        return self

    @property
    def queue(self) -> Queue:  # type: ignore[override]
        return self

    def is_exclusive(self) -> bool:
        return False  # an exclusive queue; as a consumer, not exclusive

    @property
    def consumers(self) -> list[Consumer]:  # type: ignore[override]
        """A new list of itself while it is its own only consumer (a removal from it
        changes nothing: ``remove_consumer`` and ``VHost.delete_queue`` see to that)."""
        consumers = self._consumers
        if consumers is None:
            return [self] if self._own else []
        return consumers if type(consumers) is list else [consumers]  # type: ignore[list-item]

    def _offer(self, entry: Entry) -> bool:
        """Queue's round robin, without making the list of one (a topic fan-out offers
        each message to every subscriber's queue)."""
        consumer = self._consumers
        if consumer is None:
            # (the session's credit_for, not has_credit: one Python call fewer per message)
            if not self._own or not self.session.credit_for(self):
                return False
            self._delivered(entry)
            self.session.deliver(self, self, entry)
            return True
        if type(consumer) is list or self.chooser is not None:
            return super()._offer(entry)
        assert isinstance(consumer, Consumer)
        session = consumer.session
        if not session.credit_for(consumer):
            return False
        self._delivered(entry)
        session.deliver(consumer, self, entry)
        return True

    def add_consumer(self, consumer: Consumer) -> None:
        if self._consumers is None and (consumer is self or not self._own):
            # its first consumer: itself, or one kept alone
            if consumer is self:
                self._own = True
            else:
                check_consumer_arguments(self, consumer.arguments)
                self._consumers = consumer
            if self.features is not None:
                self.features.touch()
            self.chooser = chooser_for(self)  # None for one consumer, as a rule
            return
        if type(self._consumers) is not list:
            self._consumers = self.consumers
        super().add_consumer(consumer)

    def remove_consumer(self, consumer: Consumer) -> None:
        known = self._consumers
        if type(known) is list:
            super().remove_consumer(consumer)
            return
        if known is None and consumer is self and self._own:
            self._own = False
        elif known is not None and consumer is known:
            self._consumers = None
        else:
            return
        self.chooser = None
        self.flow.after_drain()
        if self.features is not None:
            self.features.touch()
        if not self.deleted:  # auto-delete: its last consumer left
            self.vhost.delete_queue(self)

    def purge(self) -> int:
        if self.deleted and type(self._consumers) is not list:
            # VHost.delete_queue's last step: its removal of each consumer took nothing from
            # the new list ``consumers`` gave; let go of the one kept (a reference cycle
            # with a consumer that names its queue, else) and of itself as consumer
            self._consumers = None
            self._own = False
        return super().purge()

    def __repr__(self) -> str:
        return f"<SubscriptionQueue {self.name!r} vhost={self.vhost.name!r}>"

    # -- bindings -----------------------------------------------------------------------

    def bound(self, binding: Binding) -> None:
        known = self._bindings
        if known is None:
            self._bindings = binding
        elif isinstance(known, list):
            known.append(binding)
        else:
            self._bindings = [known, binding]

    def unbound(self, binding: Binding) -> None:
        known = self._bindings
        if known is binding:
            self._bindings = None
        elif isinstance(known, list) and binding in known:
            known.remove(binding)

    def bindings(self) -> list[Binding]:
        known = self._bindings
        if known is None:
            return []
        return list(known) if isinstance(known, list) else [known]

    # Three attributes every Queue writes are read-only here: one slot fewer is 8 bytes,
    # three are 32 in RSS (a 216-byte object is rounded to 224, a 192-byte one is not).
    @property
    def events(self) -> EventsStream | None:
        """The vhost's events stream: a subscription queue is never the stream itself,
        whose queue alone has none while the vhost has one (core/events_stream.py)."""
        return self.vhost.events

    @events.setter
    def events(self, events: EventsStream | None) -> None:
        pass  # the stream attaching or detaching sets the vhost's too

    @property
    def _had_consumer(self) -> bool:
        """Declared for its consumer (one that is refused deletes it, stomp/subscribing.py):
        ``remove_consumer``, the one reader, reads this only for a consumer it held."""
        return True

    @_had_consumer.setter
    def _had_consumer(self, had: bool) -> None:
        pass

    @property
    def _rr(self) -> int:
        """The round robin's turn: always 0 for its one consumer; the instance dict keeps
        it in the rare case of more (the connection consuming it by name too)."""
        consumers = self._consumers
        if type(consumers) is not list or len(consumers) < 2:
            return 0
        turn: int = self.__dict__.get("_turn", 0)
        return turn

    @_rr.setter
    def _rr(self, turn: int) -> None:
        consumers = self._consumers
        if type(consumers) is list and len(consumers) > 1:
            self.__dict__["_turn"] = turn
