"""What the core needs from durable storage, as Protocols the store implements.

The core never touches files: a durable queue holds a ``QueueStore`` and calls it when a
persistent message is enqueued, delivered, acknowledged or dropped; the broker asks the
``MessageStore`` to run a callback once what it buffered is on disk (publisher confirms).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

# A stored message as the store hands it back:
# (seq, redelivered, exchange, routing key, the fourteen properties in order, body).
StoredMessage = tuple[int, bool, str, str, tuple[Any, ...], bytes]


class QueueStore(Protocol):
    count: int
    bytes_on_disk: int

    def append(
        self,
        exchange: str,
        routing_key: str,
        properties: tuple[Any, ...],
        body: bytes,
        redelivered: bool = False,
    ) -> int:
        """Buffer the message for the next group commit; its sequence number (> 0)."""

    def remove(self, seq: int) -> None: ...

    def mark_delivered(self, seq: int) -> None: ...

    def read(self, seq: int) -> StoredMessage: ...

    def recover(self, keep: Callable[[int, int, bool], None]) -> int:
        """Rebuild from disk; ``keep(seq, body size, was_delivered)`` per live message, in
        order. Bodies stay on disk until ``read``."""

    def destroy(self) -> None: ...


# A delayed message as the store hands it back: (slot, due time in ms since the epoch,
# routing key, the fourteen properties in order, body).
DelayedRecord = tuple[int, int, str, tuple[Any, ...], bytes]


class DelayedStore(Protocol):
    """The persistent messages an ``x-delayed-message`` exchange holds until their time.
    Writes join the same group commit as queue writes (``MessageStore.when_durable``)."""

    def add(self, due_ms: int, routing_key: str, properties: tuple[Any, ...], body: bytes) -> int:
        """Buffer a message for the next group commit; its slot (> 0)."""

    def remove(self, slot: int) -> None: ...

    def recover(self) -> list[DelayedRecord]:
        """Every message still held, read back from disk."""

    def destroy(self) -> None: ...


class FsyncHistogram(Protocol):
    bounds: tuple[float, ...]  # upper bounds in seconds; counts has one more (+Inf)
    counts: list[int]
    total: float
    count: int


class MessageStore(Protocol):
    appends: int  # grows with every buffered change: compared around a publish
    bytes_on_disk: int
    segment_count: int
    before_flush: list[Callable[[], None]]

    @property
    def fsync_stats(self) -> FsyncHistogram: ...

    @property
    def has_waiters(self) -> bool: ...

    def open_queue(self, vhost: str, name: str) -> QueueStore: ...

    def open_delayed(self, vhost: str, exchange: str) -> DelayedStore: ...

    def when_durable(self, waiter: Callable[[bool], None]) -> None: ...


class DefinitionsStore(Protocol):
    def load(self) -> dict[str, Any] | None: ...

    def save(self, data: dict[str, Any]) -> None: ...
