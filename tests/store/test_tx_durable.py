"""tx.commit-ok, like a publisher confirm, waits for the fsync of the transaction's
persistent messages (issue 3: what a client was told is safe is on disk)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pika
import pytest

from tests.support import SLOW_SYNC_MS, RoostProcess, sync_ops


@pytest.fixture
def tx_channel(slow_sync: RoostProcess, qname: str) -> Iterator[Any]:
    """A transactional channel on the slow-sync broker, with a durable queue ``qname``."""
    conn = pika.BlockingConnection(pika.URLParameters(slow_sync.url))
    ch = conn.channel()
    ch.queue_declare(qname, durable=True)
    ch.tx_select()
    yield ch
    conn.close()


def test_commit_ok_follows_the_fsync_of_persistent_messages(
    slow_sync: RoostProcess, tx_channel: Any, qname: str
) -> None:
    ch = tx_channel
    ch.basic_publish("", qname, b"warm-up", pika.BasicProperties(delivery_mode=2))
    ch.tx_commit()  # the queue's directory and first segment exist from here on
    for _ in range(3):
        before = sync_ops(slow_sync)
        ch.basic_publish("", qname, b"safe", pika.BasicProperties(delivery_mode=2))
        ch.tx_commit()
        assert sync_ops(slow_sync) > before, "commit-ok came before the fsync"


def test_commit_without_persistent_messages_does_not_wait(tx_channel: Any, qname: str) -> None:
    ch = tx_channel
    started = time.monotonic()
    for _ in range(5):
        ch.basic_publish("", qname, b"transient", pika.BasicProperties(delivery_mode=1))
        ch.tx_commit()
    # five waits for the timer would take several intervals
    assert time.monotonic() - started < 2 * SLOW_SYNC_MS / 1000
