"""Which queue class a declaration makes, from its ``x-queue-type`` argument."""

from __future__ import annotations

from typing import Any

from roost.core.queues.base import Queue


def queue_class(arguments: dict[str, Any]) -> type[Queue]:
    kind = arguments.get("x-queue-type")
    if isinstance(kind, bytes):
        kind = kind.decode("utf-8", "replace")
    if kind == "stream":
        from roost.core.queues.stream import StreamQueue

        return StreamQueue
    if "x-max-priority" in arguments:
        from roost.core.queues.priority import PriorityQueue

        return PriorityQueue
    return Queue
