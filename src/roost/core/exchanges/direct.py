"""Direct exchange: exact routing-key match, one dict lookup per message."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from roost.core.exchanges.base import Binding, CountedDestinations, Destination, Exchange

if TYPE_CHECKING:
    from roost.core.message import Message

_NOWHERE: tuple[Any, ...] = ()


class DirectExchange(Exchange):
    kind = "direct"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._routes: dict[str, CountedDestinations] = {}

    def _add(self, binding: Binding) -> None:
        self._routes.setdefault(binding.routing_key, CountedDestinations()).add(
            binding.destination
        )

    def _remove(self, binding: Binding) -> None:
        dests = self._routes[binding.routing_key]
        dests.remove(binding.destination)
        if not dests.counts:
            del self._routes[binding.routing_key]

    def route(self, message: Message) -> Collection[Destination]:
        dests = self._routes.get(message.routing_key)
        return dests.counts.keys() if dests is not None else _NOWHERE
