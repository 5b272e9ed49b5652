"""STOMP subscribers on stream queues: offsets as RabbitMQ's STOMP plugin takes them."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pika
import pytest

from tests.stomp.conftest import Connect, Inbox
from tests.support import RoostProcess


def _declare_stream(roost: RoostProcess, name: str, count: int) -> None:
    """A stream holding ``count`` messages body-0 … body-(count-1), confirmed."""
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        ch.confirm_delivery()
        for i in range(count):
            ch.basic_publish("", name, f"body-{i}".encode())


def _offsets(inbox: Inbox, count: int) -> list[int]:
    return [int(inbox.message().headers["x-stream-offset"]) for _ in range(count)]


def _subscribe(conn: Any, dest: str, **headers: str) -> None:
    conn.subscribe(
        dest,
        id="s",
        ack="client-individual",
        headers={"prefetch-count": "10", **headers},
        receipt="subscribed",
    )


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("first", [0, 1, 2, 3, 4]),
        ("offset=3", [3, 4]),
        ("3", [3, 4]),
        ("last", [4]),
        ("timestamp=0", [0, 1, 2, 3, 4]),
    ],
)
def test_subscribe_from_offset(
    roost: RoostProcess, connect: Connect, qname: str, start: str, expected: list[int]
) -> None:
    _declare_stream(roost, qname, 5)
    conn, inbox = connect()
    _subscribe(conn, f"/amq/queue/{qname}", **{"x-stream-offset": start})
    assert inbox.receipt() == "subscribed"
    assert _offsets(inbox, len(expected)) == expected
    inbox.no_message()


def test_next_and_future_timestamp_wait_for_new_messages(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    _declare_stream(roost, qname, 3)
    conn, inbox = connect()
    later = int(time.time()) + 3600
    _subscribe(conn, f"/amq/queue/{qname}", **{"x-stream-offset": "next"})
    conn.subscribe(
        f"/amq/queue/{qname}",
        id="t",
        ack="client-individual",
        headers={"prefetch-count": "10", "x-stream-offset": f"timestamp={later}"},
        receipt="subscribed-t",
    )
    assert {inbox.receipt(), inbox.receipt()} == {"subscribed", "subscribed-t"}
    inbox.no_message()
    conn.send(f"/amq/queue/{qname}", "fresh", receipt="sent")
    inbox.receipt()
    # a timestamp past the log's end attaches at its end, as "next" does
    frames = [inbox.message(), inbox.message()]
    assert sorted(f.headers["subscription"] for f in frames) == ["s", "t"]
    assert all(f.body == "fresh" and f.headers["x-stream-offset"] == "3" for f in frames)
    inbox.no_message()


def test_stored_offset_resumes_after_the_last_ack(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    _declare_stream(roost, qname, 6)
    conn, inbox = connect()
    named = {"x-stream-consumer-name": "reporting"}
    _subscribe(conn, f"/amq/queue/{qname}", **{"x-stream-offset": "first"}, **named)
    inbox.receipt()
    frames = [inbox.message() for _ in range(6)]
    for frame in frames[:3]:  # acknowledge 0..2; 3..5 were delivered but not acked
        conn.ack(frame.headers["ack"], receipt="acked")
        inbox.receipt()
    conn.disconnect()

    again, inbox2 = connect()
    _subscribe(again, f"/amq/queue/{qname}", **{"x-stream-offset": "stored"}, **named)
    inbox2.receipt()
    assert _offsets(inbox2, 3) == [3, 4, 5]


def test_send_with_queue_type_header_declares_a_stream(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    conn, inbox = connect()
    conn.send(f"/queue/{qname}", "one", headers={"x-queue-type": "stream"}, receipt="sent")
    assert inbox.receipt() == "sent"
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        # a stream answers basic.get with its offsets and consumes nothing
        _, props, _ = ch.basic_get(qname)
        assert props.headers["x-stream-next-offset"] == 1
    _subscribe(conn, f"/queue/{qname}", **{"x-queue-type": "stream", "x-stream-offset": "first"})
    inbox.receipt()
    assert inbox.message().body == "one"


def test_auto_ack_subscription_on_a_stream_is_refused(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    _declare_stream(roost, qname, 1)
    conn, inbox = connect()
    conn.subscribe(f"/amq/queue/{qname}", id="s", ack="auto", headers={"prefetch-count": "10"})
    error = inbox.errors.get(timeout=5)
    assert error.headers["message"] == "precondition_failed"
    assert "requires manual acknowledgements" in error.body


def test_bad_offset_header_is_an_error(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    _declare_stream(roost, qname, 1)
    conn, inbox = connect()
    _subscribe(conn, f"/amq/queue/{qname}", **{"x-stream-offset": "offset=soon"})
    error = inbox.errors.get(timeout=5)
    assert "invalid value 'soon' for header x-stream-offset" in error.body


def test_stomp_py_idempotent_publishing_to_a_stream(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    """stomp.py SENDs x-publishing-id as text, as every STOMP header is: it is read as an
    integer, so a producer's resent messages are dropped (the stream deduplicates);
    a malformed one is refused with an ERROR frame."""
    _declare_stream(roost, qname, 0)
    conn, inbox = connect()
    dest = f"/amq/queue/{qname}"
    producer = {"x-stream-producer-name": "p1"}
    for pid, body in ((1, "one"), (2, "two"), (2, "two again"), (1, "one again"), (3, "three")):
        conn.send(dest, body, headers={**producer, "x-publishing-id": str(pid)})
    conn.send(dest, "no id", receipt="sent")  # no producer: never deduplicated
    assert inbox.receipt() == "sent"
    _subscribe(conn, dest, **{"x-stream-offset": "first"})
    got = [inbox.message() for _ in range(4)]
    assert [m.body for m in got] == ["one", "two", "three", "no id"]
    assert [m.headers.get("x-publishing-id") for m in got] == ["1", "2", "3", None]
    inbox.no_message()
    producer_url = f"{roost.http_url}/api/queues/%2F/{qname}/producers/p1"
    assert httpx.get(producer_url, auth=("guest", "guest")).json()["publishing_id"] == 3
    conn.disconnect()

    for bad in ("abc", "-1", "1.5", "9223372036854775808"):
        conn, inbox = connect()
        conn.send(dest, "x", headers={**producer, "x-publishing-id": bad})
        error = inbox.errors.get(timeout=5)
        assert error.headers["message"] == "invalid x-publishing-id", error
        assert f"'{bad}' is not a publishing id" in error.body
