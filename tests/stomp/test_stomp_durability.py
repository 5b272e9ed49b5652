"""A STOMP receipt for a persistent SEND, or for a COMMIT of persistent SENDs, means the
message is on disk (issue 4 + 3): the same group commit as AMQP confirms and tx.commit-ok."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
import stomp

from tests.integration.conftest import pika_params
from tests.stomp.conftest import Inbox
from tests.support import SLOW_SYNC_MS, RoostProcess, sync_ops


def test_receipted_persistent_sends_survive_kill_9(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        conn = stomp.Connection12([("127.0.0.1", server.stomp_port)])
        inbox = Inbox()
        conn.set_listener("inbox", inbox)
        conn.connect("guest", "guest", wait=True)
        for i in range(50):
            conn.send("/queue/stomp-durable", f"m{i}", persistent="true", receipt=f"r{i}")
        receipts = {inbox.receipt() for _ in range(50)}
        assert receipts == {f"r{i}" for i in range(50)}
        server.kill()  # no DISCONNECT, no flush: only what was fsync'ed before each receipt
        server = RoostProcess(server.data_dir).start()
        amqp = pika.BlockingConnection(pika_params(server))
        ch = amqp.channel()
        bodies = []
        while (got := ch.basic_get("stomp-durable", auto_ack=True))[0] is not None:
            bodies.append(got[2])
        amqp.close()
        assert bodies == [f"m{i}".encode() for i in range(50)]
    finally:
        server.stop()



@pytest.fixture
def sender(slow_sync: RoostProcess, qname: str) -> Iterator[tuple[Any, Inbox]]:
    """A STOMP connection to the slow-sync broker; ``qname`` exists, with its first
    segment written and synced (creating them is not what the tests measure)."""
    conn = stomp.Connection12([("127.0.0.1", slow_sync.stomp_port)])
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    conn.connect("guest", "guest", wait=True)
    conn.send(f"/queue/{qname}", "warm-up", persistent="true", receipt="warm-up")
    assert inbox.receipt(timeout=10) == "warm-up"
    yield conn, inbox
    conn.disconnect()


def test_send_receipt_follows_the_fsync(
    slow_sync: RoostProcess, sender: tuple[Any, Inbox], qname: str
) -> None:
    conn, inbox = sender
    for i in range(3):
        before = sync_ops(slow_sync)
        conn.send(f"/queue/{qname}", "safe", persistent="true", receipt=f"r{i}")
        assert inbox.receipt(timeout=10) == f"r{i}"
        assert sync_ops(slow_sync) > before, "RECEIPT came before the fsync"


def test_commit_receipt_follows_the_fsync(
    slow_sync: RoostProcess, sender: tuple[Any, Inbox], qname: str
) -> None:
    conn, inbox = sender
    for i in range(3):
        before = sync_ops(slow_sync)
        conn.begin(f"t{i}")
        conn.send(f"/queue/{qname}", "a", persistent="true", transaction=f"t{i}")
        conn.send(f"/queue/{qname}", "b", persistent="true", transaction=f"t{i}")
        conn.commit(f"t{i}", receipt=f"c{i}")
        assert inbox.receipt(timeout=10) == f"c{i}"
        assert sync_ops(slow_sync) > before, "COMMIT's RECEIPT came before the fsync"


def test_transient_receipts_do_not_wait(sender: tuple[Any, Inbox], qname: str) -> None:
    conn, inbox = sender
    started = time.monotonic()
    for i in range(5):
        conn.send(f"/queue/{qname}", "transient", receipt=f"s{i}")
        assert inbox.receipt(timeout=10) == f"s{i}"
        conn.begin(f"t{i}")
        conn.send(f"/queue/{qname}", "transient", transaction=f"t{i}")
        conn.commit(f"t{i}", receipt=f"c{i}")
        assert inbox.receipt(timeout=10) == f"c{i}"
    # ten waits for the timer would take several intervals
    assert time.monotonic() - started < 2 * SLOW_SYNC_MS / 1000
