"""The events stream in process (no event loop, so nothing flushes on its own): events are
written in batches of BATCH_EVENTS per message, a full buffer drops and counts instead of
growing, and a deleted events stream is declared again at the next flush."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost.core import events_stream
from roost.core.broker import Broker
from roost.core.message import Message, Properties
from roost.store.stream_store import StreamFiles
from tests.brokers import memory_broker

NAME = "ev"


def boot(data: Path) -> tuple[Broker, events_stream.EventsStream]:
    broker = memory_broker(stream_storage=StreamFiles(data))
    streams = events_stream.enable(broker.catalog, NAME, 1 << 20)
    return broker, streams.by_vhost["/"]


def stored(broker: Broker) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    stream: Any = broker.vhosts["/"].queues[NAME]
    reader = stream.log.reader(stream.log.first_offset)
    out = []
    while (record := reader.next()) is not None:
        props = Properties(*record[4])
        out.append((dict(props.headers or {}), json.loads(record[5])))
    reader.close()
    return out


def publish(broker: Broker, n: int) -> None:
    vhost = broker.vhosts["/"]
    for i in range(n):
        vhost.publish("", Message("", "q", Properties(message_id=str(i)), b"body"))


def test_events_go_out_in_batches(tmp_path: Path) -> None:
    broker, events = boot(tmp_path)
    broker.vhosts["/"].declare_queue("q")
    publish(broker, 1200)
    assert stored(broker) == []  # nothing written before the flush
    events.flush()
    batches = stored(broker)
    assert [h["x-roost-events"] for h, _ in batches] == [500, 500, 201]
    assert [len(b) for _, b in batches] == [500, 500, 201]
    flat = [e for _, b in batches for e in b]
    assert flat[0]["type"] == "queue.created"
    assert [e["queues"] for e in flat[1:]] == [{"q": i} for i in range(1, 1201)]
    assert [e["message_id"] for e in flat[1:]] == [str(i) for i in range(1200)]
    assert events.written == 1201 and events.dropped == 0


def test_a_full_buffer_drops_and_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events_stream, "MAX_BUFFERED", 10)
    broker, events = boot(tmp_path)
    broker.vhosts["/"].declare_queue("q")
    publish(broker, 15)
    assert len(events.buffer) == 10
    assert events.dropped == 6  # 1 queue.created + 15 published = 16 events, 10 kept
    events.flush()
    assert sum(len(b) for _, b in stored(broker)) == 10


def test_a_deleted_events_stream_comes_back(tmp_path: Path) -> None:
    broker, events = boot(tmp_path)
    vhost = broker.vhosts["/"]
    vhost.delete_queue(vhost.queues[NAME])
    vhost.declare_queue("q")
    events.flush()
    assert vhost.queues[NAME].kind == "stream"
    assert vhost.queues[NAME].events is None
    assert [e["type"] for _, b in stored(broker) for e in b] == ["queue.created"]


def test_a_classic_queue_in_the_way_turns_events_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = memory_broker(stream_storage=StreamFiles(tmp_path))
    broker.vhosts["/"].declare_queue(NAME)  # a classic queue holds the name
    events = events_stream.enable(broker.catalog, NAME, 1 << 20).by_vhost["/"]
    broker.vhosts["/"].declare_queue("q")
    events.flush()
    assert events.dropped == 1
    assert broker.vhosts["/"].queues[NAME].message_count == 0
    assert "is not a stream; no events recorded" in caplog.text
