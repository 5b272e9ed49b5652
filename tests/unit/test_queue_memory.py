"""An idle queue costs little: no deque and no publisher set until it needs them
(bench/rss_bench.py measures the broker's RSS with 100,000 queues)."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from roost.core.message import Message, Properties
from roost.core.queues.base import NO_READY
from tests.brokers import memory_broker


def test_the_shared_empty_ready_deque_refuses_entries() -> None:
    for add in (NO_READY.append, NO_READY.appendleft):
        with pytest.raises(RuntimeError):
            add(None)  # type: ignore[arg-type]
    assert len(NO_READY) == 0


def test_a_queue_gets_its_own_deque_with_its_first_message() -> None:
    vhost = memory_broker(defaults=False).catalog.add_vhost("/")
    full, idle = vhost.declare_queue("full"), vhost.declare_queue("idle")
    assert full.ready is NO_READY and idle.ready is NO_READY
    full.push(Message("", "full", Properties(), b"x"))
    assert full.ready is not NO_READY and len(full.ready) == 1
    assert idle.ready is NO_READY and len(NO_READY) == 0
    assert full.purge() == 1 and idle.purge() == 0


def test_an_idle_queue_allocates_under_a_kilobyte() -> None:
    vhost = memory_broker(defaults=False).catalog.add_vhost("/")
    n = 2000
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        queues = [vhost.declare_queue(f"q{i}") for i in range(n)]
        gc.collect()
        per_queue = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert len(queues) == n
    assert per_queue < 1024, f"{per_queue:.0f} bytes a queue"
