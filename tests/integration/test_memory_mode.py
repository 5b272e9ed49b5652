"""``roost server --data-dir none``: the in-memory twin of every store (store/memory.py).
Durable queues, persistent messages with confirms, streams and definition changes work
as with a data directory; a restart starts afresh; no directory is created."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.support import RoostProcess


@pytest.fixture
def memory_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RoostProcess]:
    monkeypatch.chdir(tmp_path)  # a data directory would appear here
    server = RoostProcess(Path("none")).start()
    yield server
    server.stop()


def channel(server: RoostProcess) -> tuple[pika.BlockingConnection, BlockingChannel]:
    conn = pika.BlockingConnection(pika.URLParameters(server.url))
    ch = conn.channel()
    ch.confirm_delivery()
    return conn, ch


def test_memory_mode_serves_durable_queues_and_streams(
    memory_server: RoostProcess, tmp_path: Path
) -> None:
    assert "no data directory: nothing survives a restart" in memory_server.log
    conn, ch = channel(memory_server)
    try:
        ch.queue_declare("jobs", durable=True)
        ch.queue_declare("log", durable=True, arguments={"x-queue-type": "stream"})
        persistent = pika.BasicProperties(delivery_mode=2)
        for i in range(3):  # confirmed (confirm_delivery raises on a nack)
            ch.basic_publish("", "jobs", b"job%d" % i, persistent, mandatory=True)
            ch.basic_publish("", "log", b"entry%d" % i, persistent, mandatory=True)
        got = [ch.basic_get("jobs", auto_ack=True)[2] for _ in range(3)]
        assert got == [b"job0", b"job1", b"job2"]
        ch.basic_qos(prefetch_count=10)
        entries: list[bytes] = []
        for _method, _props, body in ch.consume(
            "log", arguments={"x-stream-offset": "first"}, inactivity_timeout=5
        ):
            assert body is not None
            entries.append(body)
            if len(entries) == 3:
                break
        assert entries == [b"entry0", b"entry1", b"entry2"]
    finally:
        conn.close()
    assert list(tmp_path.iterdir()) == []  # nothing written under the working directory


def test_memory_mode_starts_afresh(memory_server: RoostProcess) -> None:
    conn, ch = channel(memory_server)
    ch.queue_declare("kept?", durable=True)
    ch.basic_publish("", "kept?", b"x", pika.BasicProperties(delivery_mode=2))
    conn.close()
    memory_server.stop()
    again = RoostProcess(Path("none")).start()
    try:
        conn, ch = channel(again)
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            ch.queue_declare("kept?", passive=True)
        assert refused.value.reply_code == 404
        conn.close()
    finally:
        again.stop()
