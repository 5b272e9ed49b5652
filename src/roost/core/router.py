"""A vhost's routing: a message published to an exchange goes through the exchange's
mutators and gates, is routed to the queues it reaches and enqueued there (``VHost``
inherits it; ``core/vhost.py`` holds the exchanges, queues and bindings it reads)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from roost.core.errors import AccessRefused, NotFound
from roost.core.features.direct_reply import PREFIX as REPLY_PREFIX
from roost.core.features.routing import route_walk
from roost.core.features.sender_selected import extra_keys, has_extra_keys, strip_bcc
from roost.core.mutators import MutationRefused
from roost.core.queues.base import add_refusal
from roost.core.queues.message_path import push_into

if TYPE_CHECKING:
    from roost.core.events_stream import EventsStream
    from roost.core.exchanges import Exchange
    from roost.core.features import alternate, dedup
    from roost.core.features.direct_reply import DirectReplyTo
    from roost.core.features.routing import Gate
    from roost.core.flow import Publisher
    from roost.core.message import Message
    from roost.core.queues.base import Queue
    from roost.core.tracing import Tracer


class Router:
    """What routing reads of its vhost, set by ``VHost.__init__``."""

    name: str
    exchanges: dict[str, Exchange]
    events: EventsStream | None
    tracer: Tracer | None
    policy: alternate.PolicyLookup
    replies: DirectReplyTo
    _gates: dict[Exchange, list[Gate]]
    _exchange_dedup: dict[Exchange, dedup.DedupCache]
    _queue_dedup: dict[Queue, dedup.DedupCache]

    def route(self, exchange: Exchange, message: Message) -> Collection[Queue]:
        """Queues the message reaches, following exchange-to-exchange bindings, the CC and
        BCC headers (core.features.sender_selected) and alternate exchanges."""
        dests = exchange.route(message)
        headers = message.properties.headers
        if headers and ("CC" in headers or "BCC" in headers):
            return route_walk(self, exchange, message, dests, extra_keys(headers))
        for dest in dests:
            if dest.is_exchange:
                break
        else:
            if dests:
                return dests  # the common case: only queues, no copy
        return route_walk(self, exchange, message, dests, [])

    def publish(
        self, exchange_name: str, message: Message, publisher: Publisher | None = None
    ) -> tuple[int, str]:
        """Route and enqueue: (queues reached, why it was refused: overflow
        reject-publish, a mutator; "" when it was not). A congested queue holds the
        ``publisher`` (core/flow.py)."""
        ex = self.exchanges.get(exchange_name)
        if ex is None:
            raise NotFound(f"no exchange '{exchange_name}' in vhost '{self.name}'")
        if ex.internal:
            raise AccessRefused(
                f"cannot publish to internal exchange '{exchange_name}' in vhost '{self.name}'"
            )
        if ex.mutators is not None:
            try:
                mutated = ex.mutators.run(message)
            except MutationRefused as exc:
                ex.stat_in += 1
                # refused (a nack), not unroutable (no basic.return)
                return 1, f"message refused by exchange '{ex.name}' in vhost '{self.name}': " \
                    + exc.error
            if mutated is None:
                ex.stat_in += 1
                return 1, ""  # dropped by a mutator: taken, and gone
            message = mutated
        if self._gates:
            taken = self.through_gates(ex, message)
            if taken is not None:
                ex.stat_in += 1
                return taken, ""
        reached = self._enqueue(ex, message, publisher)
        ex.stat_in += 1
        caches = self._exchange_dedup
        if caches and reached[0] and not reached[1] and (cache := caches.get(ex)) is not None:
            cache.remember(message)  # taken by every queue it reached
        return reached

    def through_gates(self, ex: Exchange, message: Message) -> int | None:
        """What the exchange's gates did with a message (an x-delayed-message exchange
        holds it, a deduplicating one drops a duplicate): how many took it, or None when
        it is to be routed now."""
        gates = self._gates.get(ex)
        if gates is None:
            return None
        headers = message.properties.headers
        if headers and has_extra_keys(headers):
            extra_keys(headers)  # refuse a malformed CC now, not when released
        for gate in gates:
            taken = gate(message)
            if taken is not None:
                if taken and (cache := self._exchange_dedup.get(ex)) is not None:
                    cache.remember(message)  # held (x-delayed-message)
                return taken
        return None

    def route_held(self, exchange: Exchange, message: Message) -> int:
        """A message the exchange held (x-delayed-message) goes on its way now."""
        if exchange.deleted:
            return 0
        return self._enqueue(exchange, message, None)[0]

    def _enqueue(
        self, ex: Exchange, message: Message, publisher: Publisher | None
    ) -> tuple[int, str]:
        """(queues reached, why queues refused it or "")."""
        queues = self.route(ex, message)
        events = self.events
        if not queues:
            if not ex.name and message.routing_key.startswith(REPLY_PREFIX):
                return (1 if self.replies.deliver(message) else 0), ""
            if events is not None:
                events.published(ex.name, message, ())
            if self.tracer is not None:
                self.tracer.published(ex, message, [])
            return 0, ""
        headers = message.properties.headers
        if headers and "BCC" in headers:
            message = strip_bcc(message)
        routed = len(queues)
        caches = self._queue_dedup
        if caches:  # a duplicate was routed (no return), its queue just does not take it
            queues = [q for q in queues if (c := caches.get(q)) is None or not c.seen(message)]
        refused = ""
        # events on: the published event, then the message's number in each queue taking it
        seqs = None if events is None else events.published(ex.name, message, queues)
        for queue in queues:
            before = queue.last_seq if seqs is not None else 0
            if not push_into(queue, message):
                refused = add_refusal(refused, queue)
            else:
                if caches and (cache := caches.get(queue)) is not None:
                    # seen only once taken, so a publisher may retry a refused one (a nack)
                    cache.remember(message)
                if seqs is not None and queue.events is not None and queue.last_seq != before:
                    seqs[queue.name] = queue.last_seq
            if publisher is not None and queue.flow.congested:
                queue.flow.hold(publisher)
        ex.stat_out += 1
        if self.tracer is not None:
            self.tracer.published(ex, message, queues)
        return routed, refused
