"""The held messages of one ``x-delayed-message`` exchange (core.durability.DelayedStore).

A ``QueueStore`` of its own under ``vhosts/<vhost>/delayed/<exchange>/``, so records,
group commit, recovery and orphan removal are the queue store's. A record's exchange field
carries the message's due time (decimal milliseconds since the epoch): the exchange is
the store's owner, so the field is free, and no second record format is needed.
"""

from __future__ import annotations

from typing import Any

from roost.store.queue_store import QueueStore

# (slot, due ms, routing key, properties, body), as core.durability.DelayedRecord
Record = tuple[int, int, str, tuple[Any, ...], bytes]


class DelayedLog:
    def __init__(self, store: QueueStore) -> None:
        self._store = store

    def add(self, due_ms: int, routing_key: str, properties: tuple[Any, ...], body: bytes) -> int:
        return self._store.append(str(due_ms), routing_key, properties, body)

    def remove(self, slot: int) -> None:
        self._store.remove(slot)

    def recover(self) -> list[Record]:
        slots: list[int] = []
        self._store.recover(lambda seq, _size, _delivered, _expires: slots.append(seq))
        out: list[Record] = []
        for slot in slots:
            _seq, _redelivered, due, routing_key, properties, body = self._store.read(slot)
            out.append((slot, int(due), routing_key, properties, body))
        return out

    def destroy(self) -> None:
        self._store.destroy()
