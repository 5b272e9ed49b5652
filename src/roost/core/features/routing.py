"""Routing beyond one exchange lookup: the vhost's slow path and its gates.

``route_walk`` runs when a message carries ``CC``/``BCC`` keys, meets an
exchange-to-exchange binding, or is routed nowhere (then alternate exchanges apply);
the common case (only queues, found by the routing key) never comes here. Gates are
steps an exchange runs before routing: deduplication, then the delay of an
``x-delayed-message`` exchange.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from roost.core.exchanges.deduplication import DeduplicationExchange
from roost.core.exchanges.delayed import DelayedExchange
from roost.core.features import alternate, dedup
from roost.core.message import Message

if TYPE_CHECKING:
    from roost.core.exchanges.base import Exchange
    from roost.core.queues.base import Queue
    from roost.core.router import Router

# A step before routing: None lets the message go on; a number ends the publish with
# that many "queues reached" (0: dropped as a duplicate; 1: held for later).
Gate = Callable[[Message], int | None]


def dedup_cache(ex: Exchange, vhost: str) -> dedup.DedupCache | None:
    """The exchange's deduplication cache, if it has one; PreconditionFailed for bad
    deduplication arguments."""
    if isinstance(ex, DeduplicationExchange):
        return ex.cache
    owner = f"exchange '{ex.name}' in vhost '{vhost}'"
    if dedup.enabled(ex.arguments, owner):
        return dedup.DedupCache.from_arguments(ex.arguments, owner)
    return None


def gates_for(ex: Exchange, cache: dedup.DedupCache | None) -> list[Gate]:
    """An exchange's gates. A duplicate (a key in ``cache``) goes nowhere; the vhost
    remembers a key only once the message was taken, so a refused one can be retried."""
    gates: list[Gate] = []
    if cache is not None:
        seen = cache.seen
        gates.append(lambda message: 0 if seen(message) else None)
    if isinstance(ex, DelayedExchange):
        hold = ex.hold
        gates.append(lambda message: 1 if hold(message) else None)
    return gates


def route_walk(
    vhost: Router, exchange: Exchange, message: Message, first: Collection[Any], keys: list[str]
) -> Collection[Queue]:
    """Every exchange on the way routes the routing key and the extra ``keys``; one that
    routes nowhere hands the message to its alternate exchange. ``first`` is what
    ``exchange`` already routed the routing key to."""
    copies = [Message(message.exchange, k, message.properties, message.body) for k in keys]
    queues: dict[Queue, None] = {}
    seen = {exchange}
    pending: list[tuple[Exchange, Collection[Any]]] = [(exchange, first)]
    while pending:
        ex, dests = pending.pop()
        if copies:
            dests = set(dests)
            for copy in copies:
                dests.update(ex.route(copy))
        if not dests:
            name = alternate.alternate_name(ex.arguments, ex.name, vhost.policy)
            alt = vhost.exchanges.get(name) if name is not None else None
            dests = (alt,) if alt is not None else ()
        for dest in dests:
            if not dest.is_exchange:
                queues[dest] = None
            elif dest not in seen:
                seen.add(dest)
                pending.append((dest, dest.route(message)))
    return queues.keys()
