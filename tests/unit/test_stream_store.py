"""A stream queue in process over the disk stream storage (``store.stream_store``) that
the server injects: messages round-trip with their properties, a fresh broker finds the
stream again, and a broker without a data directory keeps streams in memory."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path
from typing import Any

from roost.core.broker import Broker
from roost.core.message import Message, Properties
from roost.store.stream_store import StreamFiles
from tests.brokers import memory_broker

STREAM = {"x-queue-type": "stream", "x-max-age": "7D"}


class Sink:
    def __init__(self) -> None:
        self.got: list[Message] = []

    def deliver(self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message):
        self.got.append(message)

    def consumer_cancelled(self, consumer_tag: str) -> None:
        pass


def boot(data: Path) -> Broker:
    broker = memory_broker(stream_storage=StreamFiles(data))
    return broker


def read_all(broker: Broker, name: str) -> list[Message]:
    user = broker.authenticate("guest", "guest", peer_host="127.0.0.1")
    client = broker.connect(user, "/", protocol="test", peer="127.0.0.1:1")
    sink = Sink()
    session = broker.open_session(client, sink)
    session.set_qos(100, False)
    consumer = broker.consume(
        session, name, "c", no_ack=False, exclusive=False, arguments={"x-stream-offset": "first"}
    )
    session.start(consumer)
    return sink.got


HEADERS: dict[str, Any] = {
    "s": "text",
    "n": -(2**40),
    "f": 1.5,
    "b": True,
    "raw": b"\x00\xff",
    "d": decimal.Decimal("1.25"),
    "t": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
    "nested": {"list": [1, "two", None]},
}


def test_messages_round_trip_and_the_stream_comes_back(tmp_path: Path) -> None:
    broker = boot(tmp_path)
    vhost = broker.vhosts["/"]
    vhost.declare_queue("s", durable=True, arguments=STREAM)
    props = Properties(
        content_type="application/json",
        headers=dict(HEADERS),
        delivery_mode=2,
        priority=3,
        correlation_id="c-1",
        message_id="m-1",
        timestamp=1_700_000_000,
        app_id="app",
    )
    vhost.publish("", Message("", "s", props, b"first"))
    vhost.publish("", Message("", "s", Properties(), b"second"))
    broker.close_streams()

    again = boot(tmp_path)
    assert again.recover_streams() == 1
    queue = again.vhosts["/"].queues["s"]
    assert queue.kind == "stream" and queue.arguments == STREAM
    first, second = read_all(again, "s")
    assert (first.exchange, first.routing_key, first.body) == ("", "s", b"first")
    headers = first.properties.headers
    assert headers == {
        **HEADERS,
        "x-stream-offset": 0,
        "x-stream-timestamp": headers["x-stream-timestamp"],
    }
    assert first.properties.replace(headers=None) == props.replace(headers=None)
    assert second.body == b"second" and second.properties.headers is not None
    assert second.properties.headers["x-stream-offset"] == 1
    assert second.properties.replace(headers=None) == Properties()
    again.close_streams()


def test_deleting_a_stream_removes_its_files(tmp_path: Path) -> None:
    broker = boot(tmp_path)
    vhost = broker.vhosts["/"]
    vhost.declare_queue("gone", durable=True, arguments=STREAM)
    vhost.publish("", Message("", "gone", Properties(), b"x"))
    assert StreamFiles(tmp_path).saved_streams() == [("/", "gone", STREAM)]
    vhost.delete_queue_named("gone", client=None)
    assert StreamFiles(tmp_path).saved_streams() == []
    assert not list(tmp_path.glob("vhosts/*/streams/*"))


def test_a_broker_without_a_data_directory_keeps_streams_in_memory() -> None:
    """``--data-dir none``: the stream storage's in-memory twin (store/memory.py)."""
    broker = memory_broker()
    broker.vhosts["/"].declare_queue("s", durable=True, arguments=STREAM)
    broker.vhosts["/"].publish("", Message("", "s", Properties(headers={"n": 1}), b"x"))
    got = read_all(broker, "s")
    assert [m.body for m in got] == [b"x"]
    assert got[0].properties.headers is not None
    assert got[0].properties.headers["n"] == 1 and got[0].properties.headers["x-stream-offset"] == 0


def test_reading_a_memory_stream_leaves_its_stored_headers_alone() -> None:
    """A read adds x-stream-offset and x-stream-timestamp to its own copy of the
    headers: the message kept (the publisher's dict) and later reads do not get them."""
    broker = memory_broker()
    broker.vhosts["/"].declare_queue("s", durable=True, arguments=STREAM)
    sent = {"n": 1}
    broker.vhosts["/"].publish("", Message("", "s", Properties(headers=sent), b"x"))
    first = read_all(broker, "s")[0]
    assert first.properties.headers is not None
    assert first.properties.headers["x-stream-offset"] == 0
    stream = broker.vhosts["/"].queues["s"].log
    record = stream.reader(0).next()
    assert record is not None and record[4][2] == {"n": 1}
    assert sent == {"n": 1}
