"""Stream queues over AMQP with pika: declare rules, offsets, replay, waiting consumers."""

from __future__ import annotations

import datetime
import time

import pika
import pika.exceptions
import pytest

from tests.stream.conftest import declare_stream, publish, query, read
from tests.support import pump


def test_non_durable_stream_is_refused(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_declare(qname, durable=False, arguments={"x-queue-type": "stream"})
    assert info.value.reply_code == 406
    assert "non-durable" in info.value.reply_text


def test_consumer_needs_prefetch_and_manual_ack(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_consume(qname, lambda *a: None)
        conn.process_data_events(time_limit=0.2)
    assert info.value.reply_code == 406 and "prefetch" in info.value.reply_text
    ch = conn.channel()
    ch.basic_qos(prefetch_count=10)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_consume(qname, lambda *a: None, auto_ack=True)
    assert info.value.reply_code == 406


def test_offsets_first_next_integer_and_replay(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"m%d" % i for i in range(10)])
    first = read(conn, ch, qname, 10, {"x-stream-offset": "first"})
    assert first == [(i, b"m%d" % i) for i in range(10)]
    # consumption removes nothing: a second reader sees the same log from offset 4
    assert read(conn, ch, qname, 6, {"x-stream-offset": 4}) == first[4:]
    assert read(conn, ch, qname, 1, {"x-stream-offset": "last"}) == [(9, b"m9")]
    # next (the default): only messages published after subscribing
    got: list[bytes] = []
    ch.basic_qos(prefetch_count=10)
    ch.basic_consume(qname, lambda c, m, p, b: (got.append(b), c.basic_ack(m.delivery_tag)))
    conn.process_data_events(time_limit=0.1)
    assert got == []  # caught up: the consumer waits
    publish(ch, qname, [b"late"])
    assert pump(conn, lambda: got == [b"late"])
    assert ch.queue_declare(qname, passive=True).method.message_count == 11


def test_timestamp_offset(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"old"])
    time.sleep(1.1)  # AMQP timestamps have one-second resolution
    since = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    publish(ch, qname, [b"new"])
    assert read(conn, ch, qname, 1, {"x-stream-offset": since})[0][1] == b"new"


def test_many_consumers_each_at_own_position(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"%d" % i for i in range(20)])
    seen: dict[str, list[int]] = {"a": [], "b": []}
    ch.basic_qos(prefetch_count=3)
    for key, start in (("a", 0), ("b", 15)):
        ch.basic_consume(
            qname,
            lambda c, m, p, b, key=key: (
                seen[key].append(p.headers["x-stream-offset"]),
                c.basic_ack(m.delivery_tag),
            ),
            arguments={"x-stream-offset": start},
        )
    assert pump(conn, lambda: len(seen["a"]) == 20 and len(seen["b"]) == 5)
    assert seen["a"] == list(range(20)) and seen["b"] == list(range(15, 20))


def test_end_offset_delivers_range_then_cancels(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"%d" % i for i in range(10)])
    got: list[int] = []
    cancelled: list[object] = []
    ch.basic_qos(prefetch_count=100)
    ch.add_on_cancel_callback(cancelled.append)
    ch.basic_consume(
        qname,
        lambda c, m, p, b: (got.append(p.headers["x-stream-offset"]), c.basic_ack(m.delivery_tag)),
        arguments={"x-stream-offset": 3, "x-stream-end-offset": 7},
    )
    assert pump(conn, lambda: bool(cancelled))
    assert got == [3, 4, 5, 6]


def test_query_first_and_next_offsets_in_one_get(conn: pika.BlockingConnection, qname: str) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    assert query(ch, qname)["x-stream-next-offset"] == 0
    publish(ch, qname, [b"a", b"b", b"c"])
    info = query(ch, qname)
    assert (info["x-stream-first-offset"], info["x-stream-next-offset"]) == (0, 3)


def test_cancel_with_unacked_and_nack_keep_connection(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"x"] * 5)
    tags: list[int] = []
    ch.basic_qos(prefetch_count=5)
    ctag = ch.basic_consume(
        qname, lambda c, m, p, b: tags.append(m.delivery_tag), arguments={"x-stream-offset": 0}
    )
    assert pump(conn, lambda: len(tags) == 5)
    ch.basic_nack(tags[0], requeue=True)
    ch.basic_reject(tags[1], requeue=False)
    ch.basic_cancel(ctag)
    ch.basic_ack(tags[4], multiple=True)
    assert ch.is_open and conn.is_open
    # nacked messages are not redelivered: the log is unchanged, a re-read sees all five
    assert [o for o, _ in read(conn, ch, qname, 5, {"x-stream-offset": "first"})] == [0, 1, 2, 3, 4]


def test_delete_stream_with_consumer_and_late_acks(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"a", b"b"])
    tags: list[int] = []
    cancelled: list[object] = []
    ch.add_on_cancel_callback(cancelled.append)
    ch.basic_qos(prefetch_count=5)
    ch.basic_consume(
        qname,
        lambda c, m, p, b: tags.append(m.delivery_tag),
        arguments={"x-stream-offset": "first", "x-stream-consumer-name": "n"},
    )
    assert pump(conn, lambda: len(tags) == 2)
    other = conn.channel()
    assert other.queue_delete(qname).method.message_count == 2
    assert pump(conn, lambda: bool(cancelled))
    ch.basic_ack(tags[-1], multiple=True)
    declare_stream(other, qname)  # a new, empty stream of the same name
    assert query(other, qname)["x-stream-next-offset"] == 0
    assert ch.is_open and conn.is_open
