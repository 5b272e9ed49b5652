"""A message a client acked under the old leader, whose ack that leader never
replicated, is taken out of the new leader's copy when the ack reaches this node after
the copy became the queue here (``take_acked``), whatever holds the queue's ready
entries: a promoted copy's queue has a store attached, so its ready entries are paged."""

from __future__ import annotations

from roost.cluster.quorum.standin import take_acked
from roost.core.message import Message, Properties
from roost.core.queues.entry import Entry
from roost.core.queues.paged import PagedReady
from roost.core.queues.quorum import QuorumQueue
from roost.store.memory import MemoryQueueStore
from tests.brokers import memory_broker


def _promoted_copy() -> QuorumQueue:
    """Built as the quorum manager's ``_swap`` builds it: store first, then the copy's
    messages read back, the delivered ones marked redelivered."""
    vhost = memory_broker().catalog.vhosts["/"]
    queue = QuorumQueue(vhost, "work", durable=True)
    queue.attach_store(MemoryQueueStore())
    for seq in (7, 8, 9):
        entry = Entry(seq, Message("", "work", Properties(), b"m%d" % seq))
        entry.redelivered = seq != 9
        entry.deliveries = 1 if seq != 9 else 0
        queue._own_ready().append(entry)
        queue.ready_bytes += entry.size
    return queue


def test_the_acked_redelivery_leaves_a_paged_promoted_copy() -> None:
    queue = _promoted_copy()
    assert isinstance(queue.ready, PagedReady)
    before = queue.ready_bytes
    assert take_acked(queue, 8)
    assert [e.seq for e in queue.ready] == [7, 9]
    assert queue.ready_bytes < before


def test_only_a_redelivered_copy_with_that_number_is_taken() -> None:
    queue = _promoted_copy()
    assert not take_acked(queue, 9)  # never delivered: not the acked message's copy
    assert not take_acked(queue, 42)
    assert [e.seq for e in queue.ready] == [7, 8, 9]
