"""Queue types."""

from roost.core.queues.base import Entry, Queue

__all__ = ["Entry", "Queue"]
