"""Stored offsets, idempotent publishing, retention and restarts (graceful and kill -9)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pika
import pika.exceptions
import pytest

from tests.stream.conftest import declare_stream, publish, query, read
from tests.support import RoostProcess


def test_stored_offset_is_last_acked_and_survives_restart(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        ch = conn.channel()
        declare_stream(ch, "s")
        publish(ch, "s", [b"%d" % i for i in range(10)])
        named = {"x-stream-consumer-name": "reader", "x-stream-offset": "stored"}
        # deliver 5 but acknowledge only the first 3: offsets 3 and 4 are not processed
        tags: list[int] = []
        ch.basic_qos(prefetch_count=5)
        ctag = ch.basic_consume(
            "s", lambda c, m, p, b: tags.append(m.delivery_tag), arguments=named
        )
        while len(tags) < 5:
            conn.process_data_events(time_limit=0.05)
        ch.basic_ack(tags[2], multiple=True)
        ch.basic_cancel(ctag)
        conn.close()
        assert server.stop() == 0
        server.start()
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        ch = conn.channel()
        got = read(conn, ch, "s", 7, named)
        assert [o for o, _ in got] == list(range(3, 10))
        # an explicit commit through amq.roost.offsets moves it without acks
        ch.basic_publish(
            "amq.roost.offsets",
            "s",
            b"",
            pika.BasicProperties(
                headers={"x-stream-consumer-name": "reader", "x-stream-offset": 7}
            ),
        )
        assert [o for o, _ in read(conn, ch, "s", 2, named)] == [8, 9]
        conn.close()
    finally:
        server.kill()
    assert "Traceback" not in server.log


def test_offset_commit_to_missing_stream_is_an_error(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_publish(
            "amq.roost.offsets",
            qname,
            b"",
            pika.BasicProperties(headers={"x-stream-consumer-name": "c", "x-stream-offset": 1}),
        )
        ch.queue_declare(qname + ".other", durable=True)  # a round trip to see the close
    assert info.value.reply_code == 404


def test_idempotent_publish_drops_duplicates_but_confirms(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    ch.confirm_delivery()
    declare_stream(ch, qname)
    for pid in (1, 2, 3, 2, 3, 4):  # a restarted producer resends 2 and 3
        ch.basic_publish(
            "",
            qname,
            b"%d" % pid,
            pika.BasicProperties(headers={"x-stream-producer-name": "p1", "x-publishing-id": pid}),
        )  # confirmed
    info = query(ch, qname)
    assert info["x-stream-next-offset"] == 4
    assert info["x-stream-producers"] == {"p1": 4}
    assert [b for _, b in read(conn, ch, qname, 4, {"x-stream-offset": "first"})] == [
        b"1",
        b"2",
        b"3",
        b"4",
    ]


def test_retention_by_bytes_drops_whole_old_segments(
    conn: pika.BlockingConnection, qname: str
) -> None:
    ch = conn.channel()
    declare_stream(
        ch, qname, **{"x-max-length-bytes": 20_000, "x-stream-max-segment-size-bytes": 5_000}
    )
    publish(ch, qname, [b"x" * 1000] * 100)
    info = query(ch, qname)
    assert info["x-stream-next-offset"] == 100
    first = info["x-stream-first-offset"]
    assert 60 <= first < 100  # about 20 kB kept, in whole segments
    got = read(conn, ch, qname, 100 - first, {"x-stream-offset": "first"})
    assert [o for o, _ in got] == list(range(first, 100))


def test_kill_9_keeps_confirmed_messages_and_producer_ids(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        ch = conn.channel()
        ch.confirm_delivery()
        declare_stream(ch, "s")
        for pid in range(1, 51):
            ch.basic_publish(
                "",
                "s",
                b"m",
                pika.BasicProperties(
                    headers={"x-stream-producer-name": "p", "x-publishing-id": pid}
                ),
            )
        server.kill()
        with contextlib.suppress(Exception):
            conn.close()  # the broker is gone; this only frees the socket
        server.start()
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        ch = conn.channel()
        info = query(ch, "s")
        assert info["x-stream-next-offset"] == 50 and info["x-stream-producers"] == {"p": 50}
        conn.close()
    finally:
        server.kill()


def test_stored_offset_survives_kill_9(fresh_roost: RoostProcess) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    declare_stream(ch, "s")
    publish(ch, "s", [b"%d" % i for i in range(6)])
    named = {"x-stream-consumer-name": "reader", "x-stream-offset": "stored"}
    assert len(read(conn, ch, "s", 6, named)) == 6  # offsets 0..5, each acked
    query(ch, "s")  # a round trip on the channel: the broker has handled every ack
    fresh_roost.kill()
    with contextlib.suppress(Exception):
        conn.close()
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    publish(ch, "s", [b"%d" % i for i in range(6, 10)])
    assert [o for o, _ in read(conn, ch, "s", 4, named)] == [6, 7, 8, 9]
    conn.close()


def test_old_publishing_id_is_dropped_after_a_restart(fresh_roost: RoostProcess) -> None:
    def send(ch: pika.adapters.blocking_connection.BlockingChannel, pid: int) -> None:
        ch.basic_publish(
            "",
            "s",
            b"%d" % pid,
            pika.BasicProperties(headers={"x-stream-producer-name": "p", "x-publishing-id": pid}),
        )  # confirmed (or this raises)

    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.confirm_delivery()
    declare_stream(ch, "s")
    for pid in range(1, 6):
        send(ch, pid)
    conn.close()
    assert fresh_roost.stop() == 0
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.confirm_delivery()
    for pid in (3, 5, 6):  # a producer that restarted too early in its sequence
        send(ch, pid)
    info = query(ch, "s")
    assert info["x-stream-next-offset"] == 6
    assert info["x-stream-producers"] == {"p": 6}
    bodies = [b for _, b in read(conn, ch, "s", 6, {"x-stream-offset": "first"})]
    assert bodies == [b"1", b"2", b"3", b"4", b"5", b"6"]
    conn.close()
