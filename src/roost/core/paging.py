"""Paging transient messages to disk under memory pressure.

Persistent messages in durable queues are paged out behind a queue's first ready
entries anyway (they are on disk already; core.queues.base says how many stay).
Transient ones would stay in memory; once the broker's memory use passes
``paging_ratio`` x the memory high watermark (RabbitMQ's
``vm_memory_high_watermark_paging_ratio``, 0.5), a queue writes the transient messages
it queues behind its first ``PAGE_WINDOW`` ready entries to a store as well, flagged
transient so that a restart never brings them back, and keeps only their place. A
durable queue uses its own store; any other queue gets a scratch store on first need
(``MessageStore.open_spill``, under ``DATA/paged``, wiped at start and when the queue
goes). Messages queued before paging started stay in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from roost.core.alarms import ResourceAlarms
    from roost.core.durability import MessageStore, QueueStore


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Queue(Protocol):
    """What paging asks of a queue (core/queues/base.py's ``Queue``): its names and its
    store, declared here so that the pager, which queues call, imports nothing of them."""

    @property
    def name(self) -> str: ...

    @property
    def vhost(self) -> _Named: ...

    @property
    def store(self) -> QueueStore | None: ...

    def attach_store(self, store: QueueStore) -> None: ...


class Pager:
    """Tells queues whether to page transient messages, and gives them a store to."""

    __slots__ = ("alarms", "paged", "store")

    def __init__(self, store: MessageStore, alarms: ResourceAlarms) -> None:
        self.store = store
        self.alarms = alarms  # they measure memory
        self.paged = 0  # transient messages written out so far

    @property
    def active(self) -> bool:
        return self.alarms.paging

    def store_for(self, queue: Queue) -> QueueStore:
        if queue.store is None:
            queue.attach_store(self.store.open_spill(queue.vhost.name, queue.name))
        assert queue.store is not None
        return queue.store
