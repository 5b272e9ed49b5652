"""The in-memory twin of the disk store: every Protocol of ``core.durability`` kept in
RAM (the streams' in ``store/memory_streams.py``), for a broker that wants no data
directory (``roost server --data-dir none``, unit tests). Nothing survives the process;
everything else behaves as on disk, so the core has one code path whatever the store,
and the store's contract tests (tests/store/test_store_contract.py) run against both
implementations.

What "durable" means here: at once. ``appends`` never moves, so a publisher confirm or a
declare-ok never waits (``core.completion.Completion`` finds nothing pending), and a
waiter handed to ``when_durable`` is told at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Stored = tuple[int, bool, str, str, tuple[Any, ...], bytes]
Delayed = tuple[int, int, str, tuple[Any, ...], bytes]


class MemoryFsyncStats:
    bounds: tuple[float, ...] = ()
    total = 0.0
    count = 0

    def __init__(self) -> None:
        self.counts: list[int] = [0]


class MemoryQueueStore:
    """One queue's stored messages by sequence number."""

    def __init__(self) -> None:
        self.count = 0
        self.bytes_on_disk = 0
        self.on_first_write: Callable[[], None] | None = None
        self._next = 1
        self._messages: dict[int, list[Any]] = {}

    @property
    def has_files(self) -> bool:
        return False  # nothing to find missing after a restart

    def append(
        self,
        exchange: str,
        routing_key: str,
        properties: tuple[Any, ...],
        body: bytes,
        redelivered: bool = False,
        transient: bool = False,
        expires_ms: int = 0,
    ) -> int:
        seq = self._next
        self._next = seq + 1
        self._messages[seq] = [redelivered, exchange, routing_key, properties, bytes(body)]
        self.count += 1
        self.bytes_on_disk += len(body)
        return seq

    def remove(self, seq: int) -> None:
        record = self._messages.pop(seq, None)
        if record is not None:
            self.count -= 1
            self.bytes_on_disk -= len(record[4])

    def mark_delivered(self, seq: int) -> None:
        record = self._messages.get(seq)
        if record is not None:
            record[0] = True

    def read(self, seq: int) -> Stored:
        redelivered, exchange, routing_key, properties, body = self._messages[seq]
        return seq, redelivered, exchange, routing_key, properties, body

    def recover(self, keep: Callable[[int, int, bool, int], None]) -> int:
        return 0  # a new process remembers nothing

    def destroy(self) -> None:
        self._messages.clear()
        self.count = self.bytes_on_disk = 0


class MemoryDelayedStore:
    def __init__(self) -> None:
        self._next = 1
        self._held: dict[int, Delayed] = {}

    def add(self, due_ms: int, routing_key: str, properties: tuple[Any, ...], body: bytes) -> int:
        slot = self._next
        self._next = slot + 1
        self._held[slot] = (slot, due_ms, routing_key, properties, bytes(body))
        return slot

    def remove(self, slot: int) -> None:
        self._held.pop(slot, None)

    def recover(self) -> list[Delayed]:
        return list(self._held.values())

    def destroy(self) -> None:
        self._held.clear()


class MemoryStore:
    """``MessageStore``: queue, spill and delayed stores, and the (instant) group commit."""

    appends = 0  # never moves: nothing is ever waiting for a disk
    bytes_on_disk = 0
    segment_count = 0

    def __init__(self) -> None:
        self.before_flush: list[Callable[[], None]] = []
        self._stats = MemoryFsyncStats()

    @property
    def fsync_stats(self) -> MemoryFsyncStats:
        return self._stats

    def open_queue(self, vhost: str, name: str) -> MemoryQueueStore:
        return MemoryQueueStore()

    def open_member(self, vhost: str, name: str) -> tuple[MemoryQueueStore, None]:
        return MemoryQueueStore(), None  # nothing survives a restart

    def member_copies(self) -> list[tuple[str, str]]:
        return []

    def recover_member(self, vhost: str, name: str) -> None:
        return None

    def drop_member(self, vhost: str, name: str) -> None:
        pass

    def open_spill(self, vhost: str, name: str) -> MemoryQueueStore:
        return MemoryQueueStore()

    def open_delayed(self, vhost: str, exchange: str) -> MemoryDelayedStore:
        return MemoryDelayedStore()

    def when_durable(self, waiter: Callable[[bool], None]) -> None:
        waiter(True)

    def changed(self) -> None:
        for hook in self.before_flush:  # what a commit would write, written now
            hook()


class MemoryDefinitions:
    """``DefinitionsStore``: the snapshot and journal as Python values."""

    def __init__(self) -> None:
        self.damaged: list[Any] = []
        self._snapshot: dict[str, Any] | None = None
        self._journal: list[dict[str, Any]] = []
        self.snapshot_size = 0
        self.journal_size = 0

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]] | None:
        if self._snapshot is None and not self._journal:
            return None
        return self._snapshot, list(self._journal)

    def append(self, records: list[dict[str, Any]]) -> None:
        self._journal.extend(records)
        self.journal_size += len(json.dumps(records, default=str))

    def save(self, data: dict[str, Any]) -> None:
        self._snapshot = data
        self.snapshot_size = len(json.dumps(data, default=str))
        self._journal = []
        self.journal_size = 0

    def keep_evidence(self) -> Any:
        return None
