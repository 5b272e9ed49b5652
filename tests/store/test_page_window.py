"""Which persistent messages a durable queue keeps in memory (core.queues.base): the
first ``PAGE_KEEP_MESSAGES`` ready entries or ``PAGE_KEEP_BYTES`` of bodies, whichever
comes first, and only ``PAGE_WINDOW`` entries under memory pressure; the rest are read
back from the store for delivery. The core with a real disk store, in process."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.core.alarms import ResourceAlarms
from roost.core.broker import Broker
from roost.core.message import Message, Properties
from roost.core.paging import Pager
from roost.core.queues.base import PAGE_KEEP_BYTES, PAGE_KEEP_MESSAGES, PAGE_WINDOW, Queue
from roost.store.hub import DiskStore
from tests.brokers import memory_broker

PERSISTENT = Properties(delivery_mode=2)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Broker, Queue]]:
    broker = memory_broker(defaults=False)
    vhost = broker.catalog.add_vhost("/")
    hub = DiskStore(tmp_path, fsync="never")
    vhost.pager = Pager(hub, broker.alarms)
    queue = vhost.declare_queue("q", durable=True)
    queue.attach_store(hub.open_queue("/", "q"))
    yield broker, queue
    hub.files.close_all()


def _in_memory(queue: Queue) -> list[bool]:
    """Which ready entries hold their message (iterating reads nothing back; indexing
    past the head would read packed entries in)."""
    return [entry.message is not None for entry in queue.ready]


def test_a_backlog_under_the_flow_watermark_stays_in_memory(
    setup: tuple[Broker, Queue],
) -> None:
    """3,000 x 1 KiB: past the old 1,024-entry window, nothing is paged out."""
    _broker, queue = setup
    for i in range(3000):
        queue.push(Message("", "q", PERSISTENT, b"%04d" % i + b"x" * 1020))
    assert all(_in_memory(queue))
    assert queue.ready[2999].message is not None
    assert queue.ready[2999].message.body.startswith(b"2999")


def test_bodies_past_the_byte_limit_are_paged_out(setup: tuple[Broker, Queue]) -> None:
    _broker, queue = setup
    size = 64 * 1024
    kept = PAGE_KEEP_BYTES // size
    for _ in range(kept + 50):
        queue.push(Message("", "q", PERSISTENT, b"b" * size))
    memory = _in_memory(queue)
    assert memory == [True] * kept + [False] * 50
    # a paged-out message comes back whole when its turn comes
    entries = [queue.ready.popleft() for _ in range(kept + 1)]
    queue._page_in(entries[-1])
    assert entries[-1].message is not None and entries[-1].message.body == b"b" * size


def test_entries_past_the_message_limit_are_paged_out(setup: tuple[Broker, Queue]) -> None:
    _broker, queue = setup
    for _ in range(PAGE_KEEP_MESSAGES + 10):
        queue.push(Message("", "q", PERSISTENT, b"s"))
    assert _in_memory(queue) == [True] * PAGE_KEEP_MESSAGES + [False] * 10


def test_memory_pressure_shrinks_the_window(setup: tuple[Broker, Queue]) -> None:
    broker, queue = setup
    broker.alarms.paging = True
    for _ in range(PAGE_WINDOW + 10):
        queue.push(Message("", "q", PERSISTENT, b"p" * 100))
    assert _in_memory(queue) == [True] * PAGE_WINDOW + [False] * 10


def test_pressure_pages_out_what_queues_already_keep(tmp_path: Path) -> None:
    """Messages kept in memory before the pressure began are dropped past the first
    ``PAGE_WINDOW`` when the alarms say paging started, and read back whole. The broker
    hears of it through the alarms it was given (it subscribes as it is built)."""
    alarms = ResourceAlarms(memory_total=1000, memory_watermark="0.5", paging_ratio=0.5,
                            memory_probe=lambda: 300, disk_probe=lambda _dir: 10**12,
                            heap_trim=None)
    broker = memory_broker(defaults=False, alarms=alarms)
    hub = DiskStore(tmp_path, fsync="never")
    vhost = broker.catalog.add_vhost("/")
    vhost.pager = Pager(hub, broker.alarms)
    queue = vhost.declare_queue("q", durable=True)
    queue.attach_store(hub.open_queue("/", "q"))
    for i in range(3000):
        queue.push(Message("", "q", PERSISTENT, b"%04d" % i))
    alarms.check()  # 300 of 1000: past 0.5 x 0.5 of it
    assert alarms.paging
    assert _in_memory(queue) == [True] * PAGE_WINDOW + [False] * (3000 - PAGE_WINDOW)
    entries = [queue.ready.popleft() for _ in range(PAGE_WINDOW + 1)]
    queue._page_in(entries[-1])
    assert entries[-1].message is not None
    assert entries[-1].message.body == b"%04d" % PAGE_WINDOW
    hub.files.close_all()


def test_a_paged_out_backlog_costs_well_under_a_byte_a_message(
    setup: tuple[Broker, Queue],
) -> None:
    """200,000 persistent messages queued behind the kept window: the queue's runs and
    the store's bitmaps grow by a fraction of a byte each (a 4-byte size, a flag byte
    and an 8-byte location each before: 2.6 MB here), and they come back in order."""
    _broker, queue = setup
    store = queue.store
    assert store is not None
    hub = store.hub  # type: ignore[attr-defined]

    def push(count: int, start: int) -> None:
        for i in range(start, start + count):
            queue.push(Message("", "q", PERSISTENT, b"%08d" % i))
            if i % 10_000 == 0:
                hub.sync_now()
        hub.sync_now()

    push(PAGE_KEEP_MESSAGES + 1000, 0)  # the window is full: what follows is paged out
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        push(200_000, PAGE_KEEP_MESSAGES + 1000)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # measured 80-103 KB (0.4-0.5 bytes a message; what else the process allocates
    # meanwhile varies): 3/4 of a byte still tells it from the 13 bytes a message before
    assert grown < 200_000 * 3 // 4, f"{grown:,} bytes for 200,000 queued messages"
    total = PAGE_KEEP_MESSAGES + 201_000
    assert len(queue.ready) == total
    bodies = [queue.take() for _ in range(total)]
    assert [e.message.body for e in bodies if e is not None] == [b"%08d" % i for i in range(total)]
