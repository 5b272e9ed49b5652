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

from roost.core.consumer import NO_ARGUMENTS
from roost.core.flow import QueueFlow
from roost.core.queues.base import NO_READY, Queue

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.consumer import Consumer
    from roost.core.events_stream import EventsStream
    from roost.core.exchanges.base import Binding
    from roost.core.vhost import VHost


class _IdleFlow(QueueFlow):
    """The flow state of every subscription queue without a backlog: never congested,
    holding nobody. A queue whose backlog begins gets a ``QueueFlow`` of its own
    (``SubscriptionQueue.flow``) before anything could congest it."""

    __slots__ = ()

    def __init__(self) -> None:  # no queue: nothing here ever reads it
        self.congested = False
        self.stalled = False
        self.publishers = None

    def after_push(self) -> None:  # pragma: no cover - the queue swaps in its own first
        raise RuntimeError("a backlog joined the shared idle flow state")

    def after_drain(self) -> None:
        pass  # nothing queued, nobody held


IDLE_FLOW = _IdleFlow()


class SubscriptionQueue(Queue):
    __slots__ = (
        "_bindings",
        "_flow",
        "_seq",
        "chooser",
        "consumers",
        "deleted",
        "exclusive_owner",
        "mutators",
        "name",
        "ready",
        "ready_bytes",
        "stat_acked",
        "stat_delivered",
        "stat_published",
        "unacked",
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
    _plain_dispatch = True  # dispatch and _offer are Queue's

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
        # room for its one consumer: an append to [] makes room for four (24 bytes more)
        consumers: list[Consumer] = [None]  # type: ignore[list-item]
        consumers.pop()
        self.consumers = consumers
        self.unacked = 0
        self.deleted = False
        self._seq = 0
        self._flow: QueueFlow | None = None
        self.chooser = None  # both written at every declare and consumer change
        self.mutators = None
        # its bindings (one, as a rule), so that ending it scans no other queue's
        # (VHost._bindings_to)
        self._bindings: Binding | list[Binding] | None = None
        self.stat_published = 0
        self.stat_delivered = 0
        self.stat_acked = 0

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
        if len(self.consumers) < 2:
            return 0
        turn: int = self.__dict__.get("_turn", 0)
        return turn

    @_rr.setter
    def _rr(self, turn: int) -> None:
        if len(self.consumers) > 1:
            self.__dict__["_turn"] = turn

    @property
    def flow(self) -> QueueFlow:
        """Its own ``QueueFlow`` once it has had a backlog; the shared idle one before."""
        flow = self._flow
        if flow is None:
            if not self.ready:
                return IDLE_FLOW
            flow = self._flow = QueueFlow(self)
        return flow

    @flow.setter
    def flow(self, flow: QueueFlow) -> None:
        self._flow = flow
