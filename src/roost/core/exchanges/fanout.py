"""Fanout exchange: every bound destination, whatever the routing key."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from roost.core.exchanges.base import Binding, CountedDestinations, Destination, Exchange

if TYPE_CHECKING:
    from roost.core.message import Message


class FanoutExchange(Exchange):
    kind = "fanout"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._all = CountedDestinations()

    def _add(self, binding: Binding) -> None:
        self._all.add(binding.destination)

    def _remove(self, binding: Binding) -> None:
        self._all.remove(binding.destination)

    def route(self, message: Message) -> Collection[Destination]:
        return self._all.counts.keys()
