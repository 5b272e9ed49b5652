"""Which queue class a declaration makes, from its ``x-queue-type`` argument."""

from __future__ import annotations

from typing import Any

from roost.core.errors import PreconditionFailed
from roost.core.queues.base import Queue


def queue_class(arguments: dict[str, Any], queue: str, vhost: str) -> type[Queue]:
    kind = arguments.get("x-queue-type")
    if isinstance(kind, bytes):
        kind = kind.decode("utf-8", "replace")
    if kind == "stream":
        from roost.core.queues.stream import StreamQueue

        return StreamQueue
    if kind == "quorum":
        from roost.core.queues.quorum import QuorumQueue

        return QuorumQueue
    if kind is not None and kind != "classic":  # RabbitMQ 3.10's refusal, never a classic
        raise PreconditionFailed(
            f"invalid arg 'x-queue-type' for queue '{queue}' in vhost '{vhost}': "
            f"\"unsupported queue type '{kind}'\""
        )
    if "x-max-priority" in arguments:
        from roost.core.queues.priority import PriorityQueue

        return PriorityQueue
    return Queue
