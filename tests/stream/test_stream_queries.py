"""The one-round-trip offset query with many producers, and starting at a time given
in milliseconds (x-roost-start-timestamp-ms)."""

from __future__ import annotations

import time

import pika
import pika.exceptions
import pytest

from roost.pipeline.amqp import Client
from tests.stream.conftest import declare_stream, publish, query, read
from tests.support import RoostProcess


def test_offset_query_with_many_producers_fits_the_smallest_frame(
    roost: RoostProcess, qname: str
) -> None:
    # the smallest frame_max AMQP allows: the content header must still fit in it
    params = pika.URLParameters(roost.url + "?frame_max=4096")
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    declare_stream(ch, qname)
    names = [f"spark-{i:05d}-0123456789abcdef0123456789abcdef" for i in range(4000)]
    for i, name in enumerate(names):  # ~200 kB of producer table, beyond any frame
        ch.basic_publish(
            "",
            qname,
            b"",
            pika.BasicProperties(headers={"x-stream-producer-name": name, "x-publishing-id": i}),
        )
    # an old producer publishes again: it becomes the most recent one
    ch.basic_publish(
        "",
        qname,
        b"",
        pika.BasicProperties(
            headers={"x-stream-producer-name": names[0], "x-publishing-id": 10_000}
        ),
    )
    info = query(ch, qname)
    assert info["x-stream-next-offset"] == 4001
    assert info["x-stream-producer-count"] == 4000
    table = info["x-stream-producers"]
    assert 10 <= len(table) < 4000  # capped...
    assert table[names[0]] == 10_000 and table[names[-1]] == 3999  # ...most recent first
    assert names[1] not in table
    conn.close()
    with Client(roost.url) as client:  # what the Spark source's latestOffset calls
        assert client.stream_info(qname)["x-stream-next-offset"] == 4001


def test_start_at_a_time_in_milliseconds(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    ch.confirm_delivery()
    declare_stream(ch, qname)
    publish(ch, qname, [b"before"])
    time.sleep(0.02)
    since = int(time.time() * 1000)
    time.sleep(0.02)  # the same second, yet a later millisecond
    publish(ch, qname, [b"after", b"later"])
    got = read(conn, ch, qname, 2, {"x-roost-start-timestamp-ms": since})
    assert got == [(1, b"after"), (2, b"later")]
    # past the last message: the consumer starts at the end and waits
    future = int(time.time() * 1000) + 60_000
    assert read(conn, ch, qname, 1, {"x-roost-start-timestamp-ms": future}, timeout=0.3) == []
    assert query(ch, qname)["x-stream-next-offset"] == 3


@pytest.mark.parametrize(
    "arguments",
    [
        {"x-roost-start-timestamp-ms": "soon"},
        {"x-roost-start-timestamp-ms": -1},
        {"x-roost-start-timestamp-ms": 1, "x-stream-offset": "first"},
    ],
)
def test_bad_start_timestamp_is_a_406(
    conn: pika.BlockingConnection, qname: str, arguments: dict[str, object]
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    ch.basic_qos(prefetch_count=1)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_consume(qname, lambda *a: None, arguments=arguments)
    assert info.value.reply_code == 406
    assert "x-roost-start-timestamp-ms" in info.value.reply_text


def test_a_producer_name_too_long_for_a_table_key_is_counted_not_listed(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    for name in ("p" * 300, "short"):
        ch.basic_publish(
            "",
            qname,
            b"",
            pika.BasicProperties(headers={"x-stream-producer-name": name, "x-publishing-id": 1}),
        )
    info = query(ch, qname)
    assert info["x-stream-producer-count"] == 2 and info["x-stream-producers"] == {"short": 1}


def test_ensure_stream_declares_only_a_missing_one(roost: RoostProcess, qname: str) -> None:
    with Client(roost.url) as client:
        client.declare_stream(qname, **{"x-max-age": "1h"})
        client.ensure_stream(qname)  # exists with other arguments: left alone, no 406
        client.ensure_stream(qname + ".new")
        assert client.stream_info(qname + ".new")["x-stream-next-offset"] == 0
        client.check_queue(qname)
