"""Batched publishes to a stream (content type application/x-roost-stream-batch): each
message in the body is stored as its own record, with its own offset and publishing id;
the Spark writer's fast path (docs/streams.md, "Batched publishing")."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import pytest

from roost.codecs.stream_message import BATCH_CONTENT_TYPE, BATCH_LENGTH, batch_entry
from roost.pipeline.amqp import Client
from roost.store.stream_log import StreamLog
from tests.stream.conftest import declare_stream, query
from tests.support import RoostProcess, pump, restart

NO_PROPS: tuple[Any, ...] = (None,) * 14


def props(**values: Any) -> tuple[Any, ...]:
    """14 basic properties in spec order from pika-style names."""
    return tuple(values.get(name) for name in pika.BasicProperties().__dict__)


def batch(bodies: list[bytes], properties: tuple[Any, ...] = NO_PROPS) -> bytes:
    return b"".join(batch_entry(properties, body) for body in bodies)


def send_batch(
    ch: Any, stream: str, body: bytes, producer: str | None = None, first_id: int = 0
) -> None:
    headers = None
    if producer:
        headers = {"x-stream-producer-name": producer, "x-publishing-id": first_id}
    ch.basic_publish(
        "", stream, body, pika.BasicProperties(content_type=BATCH_CONTENT_TYPE, headers=headers)
    )  # confirmed, or pika raises NackError


def read_all(
    conn: pika.BlockingConnection, ch: Any, stream: str, count: int
) -> list[tuple[int, pika.BasicProperties, bytes]]:
    got: list[tuple[int, pika.BasicProperties, bytes]] = []

    def on_message(c: Any, method: Any, properties: Any, body: bytes) -> None:
        got.append((properties.headers["x-stream-offset"], properties, body))
        c.basic_ack(method.delivery_tag)

    ch.basic_qos(prefetch_count=100)
    tag = ch.basic_consume(stream, on_message, arguments={"x-stream-offset": "first"})
    pump(conn, lambda: len(got) >= count, 5.0)
    ch.basic_cancel(tag)
    return got


@pytest.fixture
def ch(conn: pika.BlockingConnection) -> Any:
    channel = conn.channel()
    channel.confirm_delivery()
    return channel


def test_each_message_of_a_batch_is_a_record_with_its_properties(
    conn: pika.BlockingConnection, ch: Any, qname: str
) -> None:
    declare_stream(ch, qname)
    ch.basic_publish("", qname, b"single")
    tagged = props(content_type="text/plain", message_id="m-1", headers={"k": "v", "n": 7})
    body = batch([b"a", b"bb"]) + batch([b"", b"\x00ccc"], tagged) + batch([b"d"])
    send_batch(ch, qname, body)
    got = read_all(conn, ch, qname, 6)
    assert [(offset, body) for offset, _, body in got] == [
        (0, b"single"), (1, b"a"), (2, b"bb"), (3, b""), (4, b"\x00ccc"), (5, b"d")
    ]
    for offset, properties, _ in got[1:]:
        assert properties.content_type == ("text/plain" if offset in (3, 4) else None)
        assert properties.message_id == ("m-1" if offset in (3, 4) else None)
    assert {k: v for k, v in got[3][1].headers.items() if not k.startswith("x-")} == {
        "k": "v", "n": 7
    }
    assert query(ch, qname)["x-stream-next-offset"] == 6


def test_a_batch_is_deduplicated_message_by_message(
    conn: pika.BlockingConnection, ch: Any, qname: str
) -> None:
    declare_stream(ch, qname)
    send_batch(ch, qname, batch([b"%d" % i for i in range(1, 11)]), "p", 1)  # ids 1..10
    # a retried writer resends 6..10 and goes on to 15; then resends all of 1..15
    send_batch(ch, qname, batch([b"%d" % i for i in range(6, 16)]), "p", 6)
    send_batch(ch, qname, batch([b"%d" % i for i in range(1, 16)]), "p", 1)
    info = query(ch, qname)
    assert info["x-stream-next-offset"] == 15
    assert info["x-stream-producers"] == {"p": 15}
    bodies = [body for _, _, body in read_all(conn, ch, qname, 15)]
    assert bodies == [b"%d" % i for i in range(1, 16)]


@pytest.mark.parametrize(
    "body",
    [
        BATCH_LENGTH.pack(10) + b"short",  # the entry runs past the body
        batch([b"ok"]) + b"\x00\x00",  # cut inside a length
        BATCH_LENGTH.pack(3) + b"\x00\x04?",  # headers flagged, no table there
        BATCH_LENGTH.pack(1) + b"\x00",  # shorter than its property flags
    ],
    ids=["past-the-end", "cut-length", "bad-properties", "short-properties"],
)
def test_a_malformed_batch_is_nacked_and_nothing_is_stored(
    conn: pika.BlockingConnection, ch: Any, qname: str, body: bytes
) -> None:
    declare_stream(ch, qname)
    send_batch(ch, qname, batch([b"first"]))
    with pytest.raises(pika.exceptions.NackError):
        send_batch(ch, qname, batch([b"lost"] * 3) + body, "p", 1)
    # the channel goes on; the refused batch left no record and no producer id
    send_batch(ch, qname, batch([b"after"]), "p", 1)
    info = query(ch, qname)
    assert info["x-stream-next-offset"] == 2 and info["x-stream-producers"] == {"p": 1}
    assert [b for _, _, b in read_all(conn, ch, qname, 2)] == [b"first", b"after"]


def test_a_batch_across_segments_survives_kill_9(fresh_roost: RoostProcess) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.confirm_delivery()
    declare_stream(ch, "s", **{"x-stream-max-segment-size-bytes": 4000})
    bodies = [b"%04d" % i + b"x" * 300 for i in range(40)]  # about 14 kB: 4 segments
    send_batch(ch, "s", batch(bodies[:25]), "p", 1)
    send_batch(ch, "s", batch(bodies[25:]), "p", 26)
    server = restart(fresh_roost, kill=True)
    try:
        with contextlib.suppress(Exception):
            conn.close()
        segments = sorted((server.data_dir / "vhosts").rglob("*.seg"))
        assert len(segments) >= 3
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        ch = conn.channel()
        ch.confirm_delivery()
        send_batch(ch, "s", batch(bodies[30:]), "p", 31)  # all already stored: dropped
        info = query(ch, "s")
        assert info["x-stream-next-offset"] == 40 and info["x-stream-producers"] == {"p": 40}
        assert [b for _, _, b in read_all(conn, ch, "s", 40)] == bodies
        conn.close()
    finally:
        server.kill()


def test_batched_and_single_appends_write_the_same_files(tmp_path: Path) -> None:
    """append_many is append in a loop, written at once: byte for byte the same segments,
    indexes and producer ids, across segment rolls."""
    payloads = [b"\x00\x00\x00\x01s" + bytes([i % 7]) * (i * 37 % 900) for i in range(300)]
    prefix = b"\x00\x00\x00\x01s"
    one = StreamLog(tmp_path / "one", max_segment_bytes=20_000)
    for i, payload in enumerate(payloads):
        one.append(prefix + payload, timestamp_ms=1000 + i // 100, producer="w",
                   publishing_id=i + 1)
    many = StreamLog(tmp_path / "many", max_segment_bytes=20_000)
    for start in range(0, 300, 100):
        many.append_many(prefix, payloads[start:start + 100], timestamp_ms=1000 + start // 100,
                         producer="w", first_id=start + 1)
    assert many.next_offset == one.next_offset == 300
    assert many.producers == one.producers == {"w": 300}
    one.close()
    many.close()
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert len([f for f in files if f.endswith(".seg")]) > 5
    assert files == sorted(p.name for p in (tmp_path / "many").iterdir())
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()


def test_is_stream_leaves_a_classic_queue_untouched(roost: RoostProcess, qname: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(roost.url))
    ch = conn.channel()
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"waiting")
    declare_stream(ch, qname + "-s")
    with Client(roost.url) as client:
        assert client.is_stream(qname + "-s")
        assert not client.is_stream(qname)
        assert client.is_stream(qname + "-s")  # the channel still works after the refusal
    method, _, body = ch.basic_get(qname, auto_ack=True)
    assert body == b"waiting" and not method.redelivered
    conn.close()
