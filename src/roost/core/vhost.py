"""A virtual host: its exchanges, queues and bindings. Routing between them is
``core/router.py`` (``VHost`` inherits it); redeclares are checked by
``core/equivalence.py``."""

from __future__ import annotations

import base64
import logging
import os
from typing import TYPE_CHECKING, Any

from roost.core.equivalence import check_exchange, check_queue
from roost.core.errors import AccessRefused, NotFound, PreconditionFailed, ResourceLocked
from roost.core.events import (
    BindingAdded,
    BindingRemoved,
    ExchangeDeclared,
    ExchangeDeleted,
    Listener,
    QueueDeclared,
    QueueDeleted,
    VHostEvent,
)
from roost.core.exchanges import Exchange, exchange_class, make_exchange
from roost.core.exchanges.default import DefaultExchange
from roost.core.exchanges.offsets import OFFSETS_EXCHANGE, OffsetsExchange
from roost.core.exchanges.producers import PRODUCERS_EXCHANGE, ProducersExchange
from roost.core.features import alternate, dedup
from roost.core.features.direct_reply import REPLY_TO, DirectReplyTo
from roost.core.features.routing import Gate, dedup_cache, gates_for
from roost.core.features.settings import validate_arguments
from roost.core.listeners import tell_all
from roost.core.queues import quorum
from roost.core.queues.base import Queue
from roost.core.queues.kinds import queue_class
from roost.core.queues.streams import Streams
from roost.core.queues.subscription import SubscriptionQueue
from roost.core.router import Router
from roost.core.tracing import TRACE_EXCHANGE, Tracer

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.events_stream import EventsStream
    from roost.core.paging import Pager

log = logging.getLogger("roost.vhost")

PREDECLARED = (
    ("amq.direct", "direct"),
    ("amq.fanout", "fanout"),
    ("amq.topic", "topic"),
    ("amq.headers", "headers"),
    ("amq.match", "headers"),
)


def server_name(prefix: str = "amq.gen-") -> str:
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")


class VHost(Router):
    def __init__(self, name: str, *, streams: Streams, pager: Pager) -> None:
        self.name = name
        # the broker's streams: stream queues open their stores through it
        self.streams = streams
        # the broker's own traffic events (core.events_stream, --events-stream); None: off
        self.events: EventsStream | None = None
        self.queues: dict[str, Queue] = {}
        self.exchanges: dict[str, Exchange] = {"": DefaultExchange(name, self.queues)}
        for ex_name, kind in PREDECLARED:
            self.exchanges[ex_name] = make_exchange(name, ex_name, kind, durable=True)
        self.exchanges[TRACE_EXCHANGE] = make_exchange(
            name, TRACE_EXCHANGE, "topic", durable=True, internal=True
        )
        # the firehose (core/tracing.py): None while this vhost does not trace
        self.tracer: Tracer | None = None
        # messages dead-lettered from this vhost's queues, by (queue kind, reason)
        self.dead_lettered: dict[tuple[str, str], int] = {}
        self.exchanges[OFFSETS_EXCHANGE] = OffsetsExchange(name, self.queues)
        self.exchanges[PRODUCERS_EXCHANGE] = ProducersExchange(name)
        # the ones above cannot be deleted; max-exchanges counts the others
        self._builtin_exchanges = len(self.exchanges)
        # told of every change to its exchanges, queues and bindings (core/events.py)
        self.on_change: list[Listener] = []
        # routing extensions (core.features): the policy that applies to an object (the
        # broker sets it), the amq.rabbitmq.reply-to consumers, gates before routing and
        # queues that drop duplicates
        self.policy: alternate.PolicyLookup = alternate.no_policy
        self.replies = DirectReplyTo(self)
        self._gates: dict[Exchange, list[Gate]] = {}
        self._exchange_dedup: dict[Exchange, dedup.DedupCache] = {}
        self._queue_dedup: dict[Queue, dedup.DedupCache] = {}
        # metadata shown and set by the management API
        self.description = ""
        self.tags: list[str] = []
        self.default_queue_type = "classic"
        # vhost limits (max-connections, max-queues: RabbitMQ's; max-exchanges: Roost's);
        # core/quotas.py sets them
        self.limits: dict[str, int] = {}
        # paging transient messages under memory pressure (core.paging); set by
        # core.persistence when the server has a disk store
        # where queues page transient messages out under memory pressure (core.paging)
        self.pager = pager

    # -- lookups --------------------------------------------------------------------------

    def exchange(self, name: str) -> Exchange:
        ex = self.exchanges.get(name)
        if ex is None:
            raise NotFound(f"no exchange '{name}' in vhost '{self.name}'")
        return ex

    def queue(self, name: str, client: Client | None = None) -> Queue:
        """The queue, checking exclusive ownership when a client asks."""
        q = self.queues.get(name)
        if q is None:
            raise NotFound(f"no queue '{name}' in vhost '{self.name}'")
        if client is not None and q.exclusive_owner is not None and q.exclusive_owner is not client:
            raise self._locked(name)
        if q.remote:
            q.check_available()  # a cluster's queue whose home node is down: 404
        return q

    def _locked(self, name: str) -> ResourceLocked:
        return ResourceLocked(
            f"cannot obtain exclusive access to locked queue '{name}' in vhost "
            f"'{self.name}'. It could be originally declared on another connection or "
            "the exclusive property value does not match that of the original declaration."
        )

    # -- exchanges ------------------------------------------------------------------------

    def declare_exchange(
        self,
        name: str,
        kind: str,
        *,
        passive: bool = False,
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: dict[str, Any] | None = None,
        limited: bool = True,
    ) -> Exchange:
        """``limited``: a new exchange counts against max-exchanges (not for definitions
        being imported or recovered, which RabbitMQ does not limit either)."""
        arguments = arguments or {}
        if name == "":
            raise AccessRefused("operation not permitted on the default exchange")
        if passive:
            return self.exchange(name)
        existing = self.exchanges.get(name)
        if existing is None and name.startswith("amq."):
            raise AccessRefused(f"exchange name '{name}' contains reserved prefix 'amq.*'")
        cls = exchange_class(kind)
        if existing is not None:
            check_exchange(existing, self.name, kind, durable, auto_delete, internal, arguments)
            return existing
        limit = self.limits.get("max-exchanges")
        if limited and limit is not None and 0 <= limit <= self.user_exchange_count:
            raise PreconditionFailed(
                f"cannot declare exchange '{name}': exchange limit in vhost '{self.name}' "
                f"({limit}) is reached"
            )
        alternate.check_argument(arguments, name, self.name)
        ex = cls(self.name, name, durable, auto_delete, internal, arguments)
        cache = dedup_cache(ex, self.name)
        gates = gates_for(ex, cache)
        self.exchanges[name] = ex
        if gates:
            self._gates[ex] = gates
        if cache is not None:
            self._exchange_dedup[ex] = cache
        ex.attach(self)
        self._changed(ExchangeDeclared(ex))
        return ex

    @property
    def user_exchange_count(self) -> int:
        """Exchanges declared by clients: not the default and amq.* ones every vhost has."""
        return len(self.exchanges) - self._builtin_exchanges

    def delete_exchange(self, name: str, *, if_unused: bool = False) -> None:
        if name == "":
            raise AccessRefused("operation not permitted on the default exchange")
        if name.startswith("amq."):
            raise AccessRefused(
                f"deletion of system exchange '{name}' in vhost '{self.name}' not allowed"
            )
        ex = self.exchanges.get(name)
        if ex is None:
            return  # RabbitMQ: deleting a missing exchange succeeds
        if if_unused and (ex.bindings or self._bindings_to(ex)):
            raise PreconditionFailed(f"exchange '{name}' in vhost '{self.name}' in use")
        self._remove_exchange(ex)

    def _remove_exchange(self, ex: Exchange) -> None:
        ex.deleted = True
        del self.exchanges[ex.name]
        self._gates.pop(ex, None)
        self._exchange_dedup.pop(ex, None)
        ex.detach()
        for binding in list(ex.bindings.values()):
            ex.unbind(binding.destination, binding.routing_key, binding.arguments)
            if type(binding.destination) is SubscriptionQueue:
                binding.destination.unbound(binding)
        for binding in self._bindings_to(ex):
            self._unbind(binding.source, ex, binding.routing_key, binding.arguments)
        self._changed(ExchangeDeleted(ex))

    def _bindings_to(self, destination: Any) -> list[Any]:
        if type(destination) is SubscriptionQueue:
            # it knows its own: a scan of every binding made each of 100,000
            # subscriptions' ends cost ~8 ms (3 s for a connection holding 400)
            return destination.bindings()
        return [b for ex in self.exchanges.values() for b in ex.bindings_to(destination)]

    # -- bindings -------------------------------------------------------------------------

    def bind(
        self, source: str, destination: Queue | Exchange, key: str, arguments: dict[str, Any]
    ) -> None:
        if source == "":
            raise AccessRefused("operation not permitted on the default exchange")
        ex = self.exchange(source)
        binding = ex.bind(destination, key, arguments)
        if binding is not None:
            if type(destination) is SubscriptionQueue:
                destination.bound(binding)
            self._changed(BindingAdded(binding))

    def unbind(
        self, source: str, destination: Queue | Exchange, key: str, arguments: dict[str, Any]
    ) -> None:
        if source == "":
            raise AccessRefused("operation not permitted on the default exchange")
        self._unbind(self.exchange(source), destination, key, arguments)

    def _unbind(self, ex: Exchange, destination: Any, key: str, arguments: dict[str, Any]) -> None:
        binding = ex.unbind(destination, key, arguments)
        if binding is None:
            return
        if type(destination) is SubscriptionQueue:
            destination.unbound(binding)
        self._changed(BindingRemoved(binding))
        if ex.auto_delete and not ex.bindings and not ex.deleted:
            self._remove_exchange(ex)

    # -- queues ---------------------------------------------------------------------------

    def declare_queue(
        self,
        name: str,
        *,
        client: Client | None = None,
        passive: bool = False,
        durable: bool = False,
        exclusive: bool = False,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
        server_named: bool = False,
        limited: bool = True,
        subscription: bool = False,
    ) -> Queue:
        """``server_named``: the caller chose an ``amq.gen-`` name for a declare without
        one (so that it could check its permissions on that name first). ``limited``: a
        new queue counts against max-queues (not for imported or recovered definitions:
        RabbitMQ checks the limit on the channel, not on import). ``subscription``: the
        queue of one topic subscription (exclusive, auto-delete, no arguments), made as a
        ``SubscriptionQueue`` that costs less memory and behaves the same."""
        arguments = arguments or {}
        if (
            self.default_queue_type != "classic"
            and durable
            and not (exclusive or auto_delete or passive)
            and "x-queue-type" not in arguments
        ):
            # RabbitMQ 3.10: a durable, shared queue declared without a type gets the
            # vhost's default, written into its arguments (so a redeclare matches)
            arguments = {**arguments, "x-queue-type": self.default_queue_type}
        if name.startswith(REPLY_TO):  # passive or not, as RabbitMQ
            return self.replies.declare(name)
        if passive:
            if not name:
                raise NotFound(f"no queue '' in vhost '{self.name}'")
            found = self.queue(name, client)
            found.refresh()  # declare-ok's counts (a cluster: from the home node)
            return found
        unnamed = server_named or not name
        if not name:
            name = server_name()
        elif name.startswith("amq.") and not server_named:
            raise AccessRefused(f"queue name '{name}' contains reserved prefix 'amq.*'")
        durable = durable and not exclusive  # RabbitMQ: an exclusive queue is never durable
        existing = self.queues.get(name)
        if existing is not None:
            self.queue(name, client)  # another connection's exclusive queue: 405
            # RabbitMQ checks ownership strictly before equivalence: a declare must be
            # exclusive exactly when the queue is this connection's exclusive queue (405,
            # not 406 "inequivalent arg 'exclusive'", from another channel of the owner)
            if client is not None and existing.exclusive_owner is not (
                client if exclusive else None
            ):
                raise self._locked(name)
            check_queue(existing, self.name, durable, exclusive, auto_delete, arguments)
            existing.refresh()  # declare-ok's counts (a cluster: from the home node)
            return existing
        limit = self.limits.get("max-queues")
        if limited and limit is not None and 0 <= limit <= len(self.queues):
            raise PreconditionFailed(
                f"cannot declare queue '{name}': queue limit in vhost '{self.name}' "
                f"({limit}) is reached"
            )
        owner = client if exclusive else None
        where = f"queue '{name}' in vhost '{self.name}'"
        cache = (
            dedup.DedupCache.from_arguments(arguments, where)
            if dedup.enabled(arguments, where)
            else None
        )
        cls = queue_class(arguments, name, self.name)
        if subscription and cls is Queue and exclusive and auto_delete and not arguments:
            cls = SubscriptionQueue
        if cls.kind == "quorum":
            quorum.check_declare(
                name,
                self.name,
                server_named=unnamed,
                durable=durable,
                exclusive=exclusive,
                auto_delete=auto_delete,
                arguments=arguments,
            )
        if cls.kind != "stream":
            validate_arguments(arguments, name, self.name)
        queue = cls(
            self,
            name,
            durable=durable,
            exclusive_owner=owner,
            auto_delete=auto_delete,
            arguments=arguments,
        )
        self.queues[name] = queue
        if cache is not None:
            self._queue_dedup[queue] = cache
        if owner is not None and cls is not SubscriptionQueue:
            # a subscription's queue is not listed there (a set entry is 40-100 bytes at
            # 100,000 of them): it ends with its one consumer, which its session's end
            # cancels before the connection's exclusive queues go
            owner.exclusive_queues.add(queue)
        self._changed(QueueDeclared(queue))
        return queue

    def adopt_queue(self, queue: Queue) -> None:
        """A queue made elsewhere joins this vhost and is announced (a cluster's stand-in
        for a queue homed on another node, roost.cluster.remote)."""
        self.queues[queue.name] = queue
        self._changed(QueueDeclared(queue))

    def delete_queue(self, queue: Queue) -> int:
        """Remove a queue: cancel its consumers, drop its bindings. Returns messages lost."""
        if queue.deleted:
            return 0
        queue.deleted = True
        count = queue.message_count
        self.queues.pop(queue.name, None)
        if queue.exclusive_owner is not None:
            queue.exclusive_owner.exclusive_queues.discard(queue)
        for consumer in list(queue.consumers):
            queue.consumers.remove(consumer)
            consumer.session.consumer_gone(consumer)
        for binding in self._bindings_to(queue):
            self._unbind(binding.source, queue, binding.routing_key, binding.arguments)
        self._queue_dedup.pop(queue, None)
        queue.purge()
        self._changed(QueueDeleted(queue))
        return count

    def delete_queue_named(
        self, name: str, *, client: Client | None, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        try:
            queue = self.queue(name, client)
        except NotFound:
            return 0  # RabbitMQ: deleting a missing queue succeeds with a count of 0
        if if_unused and queue.consumers:
            raise PreconditionFailed(f"queue '{name}' in vhost '{self.name}' in use")
        if if_empty and queue.message_count:
            raise PreconditionFailed(f"queue '{name}' in vhost '{self.name}' is not empty")
        return self.delete_queue(queue)

    # -- change notification --------------------------------------------------------------

    def _changed(self, event: VHostEvent) -> None:
        tell_all(self.on_change, event, log, f" in vhost '{self.name}'")
