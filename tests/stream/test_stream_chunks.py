"""Chunked stream reads (consumer argument ``x-roost-chunk-bytes``): each delivery holds
consecutive records as stored, decoded with ``roost.pipeline.chunks``; acks, end offsets
and stored offsets work per chunk."""

from __future__ import annotations

from typing import Any

import pika
import pika.exceptions
import pytest

from roost.pipeline.chunks import CHUNK_CONTENT_TYPE, records
from tests.stream.conftest import declare_stream

COUNT = 500


def _filled(conn: pika.BlockingConnection, name: str) -> Any:
    """A channel, after declaring stream ``name`` and publishing COUNT messages to it."""
    ch = conn.channel()
    declare_stream(ch, name)
    ch.confirm_delivery()
    for i in range(COUNT):
        props = pika.BasicProperties(
            content_type="text/plain",
            message_id=f"id-{i}",
            headers={"n": i, "tag": "odd" if i % 2 else "even"},
        )
        ch.basic_publish("", name, b"body-%d" % i, props)
    return ch


def _chunks(
    conn: pika.BlockingConnection, ch: Any, name: str, arguments: dict[str, Any]
) -> list[tuple[Any, bytes]]:
    """Consume until the broker cancels at x-stream-end-offset: (properties, body)."""
    got: list[tuple[Any, bytes]] = []
    cancelled: list[str] = []
    ch.basic_qos(prefetch_count=4)
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    ch.basic_consume(
        name,
        lambda c, m, p, b: (got.append((p, b)), c.basic_ack(m.delivery_tag)),
        arguments=arguments,
    )
    deadline = 100
    while not cancelled and deadline:
        conn.process_data_events(time_limit=0.1)
        deadline -= 1
    assert cancelled, "the consumer was not cancelled at its end offset"
    return got


def test_chunks_hold_every_record_in_order_with_properties(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = _filled(conn, qname)
    got = _chunks(conn, ch, qname, {"x-stream-offset": 0, "x-stream-end-offset": COUNT,
                                    "x-roost-chunk-bytes": 2048})
    assert len(got) > 5, "2 KiB chunks of ~80-byte records: several deliveries"
    offsets: list[int] = []
    for props, body in got:
        assert props.content_type == CHUNK_CONTENT_TYPE
        decoded = list(records(body))
        assert len(body) <= 2048 or len(decoded) == 1
        assert props.headers["x-stream-offset"] == decoded[0][0]
        assert props.headers["x-stream-chunk-records"] == len(decoded)
        for offset, timestamp, exchange, key, values, message in decoded:
            assert (exchange, key, message) == ("", qname, b"body-%d" % offset)
            assert values[0] == "text/plain" and values[8] == f"id-{offset}"
            assert values[2] == {"n": offset, "tag": "odd" if offset % 2 else "even"}
            assert timestamp > 0
            offsets.append(offset)
    assert offsets == list(range(COUNT))


def test_a_chunk_stops_at_the_end_offset_and_starts_at_the_wanted_one(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = _filled(conn, qname)
    got = _chunks(conn, ch, qname, {"x-stream-offset": 123, "x-stream-end-offset": 130,
                                    "x-roost-chunk-bytes": 1 << 20})
    assert len(got) == 1
    assert [r[0] for r in records(got[0][1])] == list(range(123, 130))


def test_acking_a_chunk_stores_its_last_offset(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = _filled(conn, qname)
    name = {"x-stream-consumer-name": "etl"}
    _chunks(conn, ch, qname, {"x-stream-offset": 0, "x-stream-end-offset": 200,
                              "x-roost-chunk-bytes": 4096, **name})
    # a plain consumer resuming from the stored offset starts after the chunk's last one
    first: list[int] = []
    ch.basic_qos(prefetch_count=1)
    ch.basic_consume(
        qname,
        lambda c, m, p, b: first.append(p.headers["x-stream-offset"]),
        arguments={"x-stream-offset": "stored", **name},
    )
    while not first:
        conn.process_data_events(time_limit=0.1)
    assert first[0] == 200


@pytest.mark.parametrize("value", [-1, "big", 64 * 1024 * 1024])
def test_a_bad_chunk_size_is_refused(
    conn: pika.BlockingConnection, qname: str, value: Any
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    ch.basic_qos(prefetch_count=1)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_consume(qname, lambda *a: None, arguments={"x-roost-chunk-bytes": value})
        conn.process_data_events(time_limit=0.2)
    assert info.value.reply_code == 406 and "x-roost-chunk-bytes" in info.value.reply_text
