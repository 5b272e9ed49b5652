"""The default exchange "": every queue is implicitly bound by its own name.

Compiled with mypyc (docs/compiled.md): every publish to a queue by name routes here."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from roost.core.exchanges.base import Destination, Exchange

if TYPE_CHECKING:
    from roost.core.message import Message
    from roost.core.queues.base import Queue


class DefaultExchange(Exchange):
    kind = "direct"

    def __init__(self, vhost: str, queues: dict[str, Queue]) -> None:
        super().__init__(vhost, "", True, False, False, {})
        self._queues = queues

    def route(self, message: Message) -> Collection[Destination]:
        queue = self._queues.get(message.routing_key)
        return (queue,) if queue is not None else ()
