"""A named consumer's stored offset is the end of its *contiguous* settled deliveries:
acks out of order, nacks with requeue and rejects each move it the documented way."""

from __future__ import annotations

from typing import Any

import pika

from tests.stream.conftest import declare_stream, publish, read
from tests.support import pump

NAMED = {"x-stream-consumer-name": "worker", "x-stream-offset": "stored"}


def deliveries(
    conn: pika.BlockingConnection, ch: Any, name: str, count: int
) -> tuple[str, dict[int, int]]:
    """Subscribe as the named consumer, receive ``count`` deliveries, settle none:
    (consumer tag, offset -> delivery tag)."""
    tags: dict[int, int] = {}
    ch.basic_qos(prefetch_count=count)
    ctag = ch.basic_consume(
        name,
        lambda c, m, p, b: tags.__setitem__(p.headers["x-stream-offset"], m.delivery_tag),
        arguments=NAMED,
    )
    assert pump(conn, lambda: len(tags) == count), tags
    return ctag, tags


def resumes_at(conn: pika.BlockingConnection, ch: Any, name: str) -> int:
    """The first offset a fresh ``stored`` subscription gets (acked, so it moves on:
    callers subscribe again only through ``deliveries``)."""
    got = read(conn, ch, name, 1, NAMED, ack=False)
    return got[0][0]


def test_out_of_order_acks_store_only_the_contiguous_prefix(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"%d" % i for i in range(8)])
    ctag, tags = deliveries(conn, ch, qname, 6)  # offsets 0..5
    for offset in (5, 3, 0, 1):  # 2 and 4 never acknowledged
        ch.basic_ack(tags[offset])
    ch.basic_cancel(ctag)
    # the highest acked offset is 5, but 2 was never processed: resume there
    assert resumes_at(conn, ch, qname) == 2


def test_acking_the_gap_moves_the_stored_offset_past_earlier_out_of_order_acks(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"%d" % i for i in range(8)])
    ctag, tags = deliveries(conn, ch, qname, 5)  # offsets 0..4
    for offset in (4, 2, 3, 1, 0):  # the last ack closes the gap
        ch.basic_ack(tags[offset])
    ch.basic_cancel(ctag)
    assert resumes_at(conn, ch, qname) == 5


def test_nack_with_requeue_keeps_the_stored_offset_before_it(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"%d" % i for i in range(8)])
    ctag, tags = deliveries(conn, ch, qname, 6)
    ch.basic_ack(tags[0])
    ch.basic_ack(tags[1])
    ch.basic_nack(tags[2], requeue=True)  # "not processed, try again"
    for offset in (3, 4, 5):
        ch.basic_ack(tags[offset])
    ch.basic_cancel(ctag)
    assert resumes_at(conn, ch, qname) == 2


def test_reject_without_requeue_counts_as_processed(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"%d" % i for i in range(8)])
    ctag, tags = deliveries(conn, ch, qname, 4)
    ch.basic_ack(tags[0])
    ch.basic_reject(tags[1], requeue=False)  # "done with it, drop it"
    ch.basic_nack(tags[2], requeue=False)
    ch.basic_cancel(ctag)  # 3 was delivered, never settled
    assert resumes_at(conn, ch, qname) == 3


def test_deliveries_unacked_when_the_channel_closes_are_not_stored(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(ch, qname)
    publish(ch, qname, [b"%d" % i for i in range(8)])
    _ctag, tags = deliveries(conn, ch, qname, 5)
    ch.basic_ack(tags[0])
    ch.basic_ack(tags[3])  # 1 and 2 are in flight when the channel goes
    ch.close()
    ch = conn.channel()
    assert resumes_at(conn, ch, qname) == 1
