"""Queue types."""

from roost.core.queues.base import Queue
from roost.core.queues.entry import Entry

__all__ = ["Entry", "Queue"]
