"""``x-delayed-message``: a message with an ``x-delay`` header waits before it is routed.

As the rabbitmq-delayed-message-exchange plugin: the exchange argument ``x-delayed-type``
names how the exchange routes (direct, fanout, topic, headers or x-consistent-hash; 406
otherwise). A message whose ``x-delay`` header is a positive number of milliseconds (an
integer, a float, or a string of digits; at most 2**32 - 1) is held and routed that much
later, its ``x-delay`` header then set to minus the delay; any other message is routed
at once. Persistent messages held by a durable exchange are written to the store
(``core.durability.DelayedStore``) in the publish's group commit, so a publisher confirm
means the message survives a restart; one that fell due while the broker was down is
routed right after start. Transient messages, and those of transient exchanges, are held
in memory only.

Differences from the plugin: a held message is not returned to a ``mandatory`` publisher
(the plugin returns every delayed message as unroutable, because it routes later); the
delay applies on the exchange the message is published to, not at exchange-to-exchange
hops.
"""

from __future__ import annotations

import asyncio
import decimal
import heapq
import logging
import re
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from roost.core.errors import BrokerError, PreconditionFailed
from roost.core.exchanges.base import Binding, Destination, Exchange
from roost.core.exchanges.consistent_hash import ConsistentHashExchange
from roost.core.exchanges.direct import DirectExchange
from roost.core.exchanges.fanout import FanoutExchange
from roost.core.exchanges.headers import HeadersExchange
from roost.core.exchanges.topic import TopicExchange
from roost.core.message import Message, Properties

if TYPE_CHECKING:
    from roost.core.durability import DelayedStore
    from roost.core.vhost import VHost

log = logging.getLogger("roost.delayed")

TYPE_ARGUMENT = "x-delayed-type"
DELAY_HEADER = "x-delay"
MAX_DELAY = 2**32 - 1  # the plugin's bound (Erlang's longest timer)
INNER_TYPES: dict[str, type[Exchange]] = {
    cls.kind: cls
    for cls in (
        DirectExchange,
        FanoutExchange,
        TopicExchange,
        HeadersExchange,
        ConsistentHashExchange,
    )
}
_DIGITS = re.compile(r"[+-]?[0-9]+")


def now_ms() -> int:
    return int(time.time() * 1000)


def delay_of(message: Message) -> int | None:
    """The message's delay in ms, or None when it is to be routed at once."""
    headers = message.properties.headers
    if not headers:
        return None
    value = headers.get(DELAY_HEADER)
    if value is None or isinstance(value, bool):
        return None
    numeric = isinstance(value, int | float | decimal.Decimal)
    if not numeric and not (isinstance(value, str) and _DIGITS.fullmatch(value)):
        return None
    delay = int(value)
    return delay if 0 < delay <= MAX_DELAY else None


class DelayedExchange(Exchange):
    kind = "x-delayed-message"

    def __init__(
        self,
        vhost: str,
        name: str,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: dict[str, Any],
    ) -> None:
        super().__init__(vhost, name, durable, auto_delete, internal, arguments)
        inner_kind = arguments.get(TYPE_ARGUMENT)
        cls = INNER_TYPES.get(inner_kind) if isinstance(inner_kind, str) else None
        if cls is None:
            raise PreconditionFailed(
                f"Invalid argument, '{TYPE_ARGUMENT}' must be an existing exchange type"
            )
        # routes (and indexes bindings) for this exchange; the bindings live here
        self.inner = cls(vhost, name, durable, auto_delete, internal, arguments)
        self.store: DelayedStore | None = None  # set by core.persistence when durable
        # (due ms, order, message, store slot or 0), earliest first
        self._held: list[tuple[int, int, Message, int]] = []
        self._order = 0
        self._vhost: VHost | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0

    @property
    def held(self) -> int:
        """How many messages wait."""
        return len(self._held)

    # -- routing, by the inner type ---------------------------------------------------

    def attach(self, vhost: VHost) -> None:
        self._vhost = vhost

    def detach(self) -> None:
        """Deleted: what it holds is dropped (its store goes with core.persistence)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._held.clear()

    def validate_binding(self, routing_key: str, arguments: dict[str, Any]) -> None:
        self.inner.validate_binding(routing_key, arguments)

    def _add(self, binding: Binding) -> None:
        self.inner._add(binding)

    def _remove(self, binding: Binding) -> None:
        self.inner._remove(binding)

    def route(self, message: Message) -> Collection[Destination]:
        return self.inner.route(message)

    # -- holding ----------------------------------------------------------------------

    def hold(self, message: Message) -> bool:
        """Keep the message for later when it asks for a delay; False: route it now."""
        delay = delay_of(message)
        if delay is None:
            return False
        due = now_ms() + delay
        slot = 0
        if self.store is not None and message.persistent:
            slot = self.store.add(
                due, message.routing_key, message.properties.as_tuple(), message.body
            )
        self._push(due, message, slot)
        return True

    def attach_store(self, store: DelayedStore) -> None:
        """Durable exchange: write held persistent messages to ``store``; take back
        what it kept from before a restart."""
        self.store = store
        for slot, due, routing_key, props, body in store.recover():
            self._push(due, Message(self.name, routing_key, Properties(*props), body), slot)

    def detach_store(self) -> DelayedStore | None:
        store, self.store = self.store, None
        return store

    def _push(self, due: int, message: Message, slot: int) -> None:
        self._order += 1
        heapq.heappush(self._held, (due, self._order, message, slot))
        self._arm()

    def _arm(self) -> None:
        """One timer per exchange, for the earliest message."""
        if not self._held or self.deleted:
            return
        due = self._held[0][0]
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a unit test): armed by the next hold
            self._timer = None
            return
        self._timer_due = due
        self._timer = loop.call_later(max(0.0, (due - now_ms()) / 1000), self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = now_ms()
        while self._held and self._held[0][0] <= now:
            _due, _order, message, slot = heapq.heappop(self._held)
            self._release(message, slot)
        self._arm()

    def _release(self, message: Message, slot: int) -> None:
        headers = dict(message.properties.headers or {})
        headers[DELAY_HEADER] = -(delay_of(message) or 0)  # the plugin's mark: "was delayed"
        props = message.properties.replace(headers=headers)
        due = Message(self.name, message.routing_key, props, message.body)
        if self._vhost is not None:
            try:
                self._vhost.route_held(self, due)
            except BrokerError as exc:  # e.g. a CC header that is no array: dropped
                log.warning("delayed message on exchange '%s' dropped: %s", self.name, exc.text)
        if slot and self.store is not None:
            self.store.remove(slot)
