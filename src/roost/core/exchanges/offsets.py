"""``amq.roost.offsets``: publishing here commits a named stream consumer's offset.

The message (body ignored) carries headers ``x-stream`` (the stream queue's name; the
routing key is used when absent), ``x-stream-consumer-name`` and ``x-stream-offset`` (an
integer: the last offset processed; a consumer subscribing with ``x-stream-offset:
stored`` starts after it). Nothing is routed; a bad commit is a 406 channel error.
Committing needs read access to the stream (``Broker.publish`` checks it), as consuming
it does: write on this exchange alone must not let a user move the offsets of streams
they cannot read.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from roost.core.errors import NotFound, PreconditionFailed
from roost.core.exchanges.base import Destination, Exchange
from roost.core.message import header_text

if TYPE_CHECKING:
    from roost.core.message import Message
    from roost.core.queues.base import Queue

OFFSETS_EXCHANGE = "amq.roost.offsets"


def target_stream(message: Message) -> str:
    """The stream an offset commit (or a producer query) is for: header ``x-stream``,
    else the routing key."""
    return header_text((message.properties.headers or {}).get("x-stream")) or message.routing_key


class OffsetsExchange(Exchange):
    kind = "x-roost-offsets"

    def __init__(self, vhost: str, queues: dict[str, Queue]) -> None:
        super().__init__(vhost, OFFSETS_EXCHANGE, True, False, False, {})
        self._queues = queues

    def bind(self, destination: Destination, routing_key: str, arguments: dict[str, Any]) -> None:
        raise PreconditionFailed(f"cannot bind to exchange '{OFFSETS_EXCHANGE}'")

    def route(self, message: Message) -> Collection[Destination]:
        headers = message.properties.headers or {}
        stream = target_stream(message)
        name = header_text(headers.get("x-stream-consumer-name"))
        offset = headers.get("x-stream-offset")
        queue = self._queues.get(stream)
        if queue is None:
            raise NotFound(f"no queue '{stream}' in vhost '{self.vhost}'")
        commit = getattr(queue, "commit_offset", None)
        if commit is None:
            raise PreconditionFailed(f"queue '{stream}' in vhost '{self.vhost}' is not a stream")
        if not name or isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise PreconditionFailed(
                "an offset commit needs headers x-stream-consumer-name and x-stream-offset"
            )
        commit(name, offset)
        return ()
