"""rstream 1.1 against a real Roost on free ports, over the stream protocol: publish
with confirms, consume from every offset specification, deduplication, stored offsets,
stream figures, and interop with AMQP 0-9-1 (pika) both ways. A bad frame closes only
its own connection with the protocol's response code. STOMP reads what a stream client
wrote and the reverse."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

import pika
import pytest
from rstream import (
    AMQPMessage,
    ConsumerOffsetSpecification,
    OffsetNotFound,
    OffsetType,
    Properties,
    RawMessage,
    amqp_decoder,
)
from rstream.exceptions import StreamDoesNotExist

from roost.stream_protocol import constants as c
from roost.stream_protocol.codec import FrameReader, encode
from roost.stream_protocol.frames import Close, PeerProperties
from tests.stream_protocol.clients import (
    Got,
    _consumer,
    _producer,
    _raw_session,
    _read,
    _run,
    _until,
)
from tests.support import RoostProcess


def test_publish_with_confirms_then_consume_from_every_offset_spec(
    roost: RoostProcess, qname: str
) -> None:
    async def main() -> dict[str, Got]:
        confirmed: list[int] = []
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            for i in range(5):
                await producer.send(
                    qname,
                    AMQPMessage(body=f"a{i}".encode()),
                    on_publish_confirm=lambda st: confirmed.extend(
                        [st.message_id] if st.is_confirmed else []
                    ),
                )
            await _until(lambda: len(confirmed) == 5, "five confirms")
            await asyncio.sleep(0.02)
            middle = int(time.time() * 1000)
            await asyncio.sleep(0.02)
            await producer.send_batch(qname, [RawMessage(f"b{i}".encode()) for i in range(5)])
            await asyncio.sleep(0.2)
        out: dict[str, Any] = {}
        out["first"] = await _read(roost, qname, ConsumerOffsetSpecification(OffsetType.FIRST), 10)
        out["offset"] = await _read(
            roost, qname, ConsumerOffsetSpecification(OffsetType.OFFSET, 7), 3
        )
        out["last"] = await _read(roost, qname, ConsumerOffsetSpecification(OffsetType.LAST), 5)
        out["timestamp"] = await _read(
            roost, qname, ConsumerOffsetSpecification(OffsetType.TIMESTAMP, middle), 5
        )
        # next: nothing old, only what is published after the subscription
        nxt: Got = []
        async with _consumer(roost) as consumer:
            await consumer.subscribe(
                qname,
                lambda m, ctx: nxt.append((ctx.offset, m)),
                offset_specification=ConsumerOffsetSpecification(OffsetType.NEXT),
            )
            await asyncio.sleep(0.1)
            async with _producer(roost) as producer:
                await producer.send_wait(qname, b"late")
            await _until(lambda: len(nxt) == 1, "the late message")
        out["next"] = nxt
        return out

    out = _run(main())
    first = out["first"]
    assert [o for o, _ in first] == list(range(10))
    assert [amqp_decoder(m).body for _, m in first[:5]] == [f"a{i}".encode() for i in range(5)]
    assert [m for _, m in first[5:]] == [f"b{i}".encode() for i in range(5)]
    assert out["offset"] == first[7:]
    assert out["last"] == first[5:]  # the last chunk (send_batch's five), as in RabbitMQ
    assert out["timestamp"] == first[5:]
    assert out["next"] == [(10, b"late")]


def test_deduplication_on_reference_and_publishing_id(roost: RoostProcess, qname: str) -> None:
    async def main() -> tuple[int, int, Got]:
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            for pid in (1, 2, 3):
                await producer.send_wait(
                    qname, RawMessage(f"m{pid}".encode(), publishing_id=pid), publisher_name="app"
                )
            # a producer that restarts and resends 2 and 3 before its new 4
            for pid in (2, 3, 4):
                await producer.send_wait(
                    qname, RawMessage(f"m{pid}".encode(), publishing_id=pid), publisher_name="app"
                )
        client = _consumer(roost)
        await client.start()
        try:
            seq = await (await client.default_client).query_publisher_sequence(qname, "app")
            none = await (await client.default_client).query_publisher_sequence(qname, "nobody")
        finally:
            await client.close()
        got = await _read(roost, qname, ConsumerOffsetSpecification(OffsetType.FIRST), 4)
        return seq, none, got

    seq, none, got = _run(main())
    assert got == [(0, b"m1"), (1, b"m2"), (2, b"m3"), (3, b"m4")]
    assert (seq, none) == (4, 0)


def test_store_and_query_offsets_survive_a_restart(
    fresh_roost: RoostProcess, qname: str
) -> None:
    async def store() -> int:
        async with _producer(fresh_roost) as producer:
            await producer.create_stream(qname)
            await producer.send_batch(qname, [b"x"] * 5)
        async with _consumer(fresh_roost) as consumer:
            with pytest.raises(OffsetNotFound):
                await consumer.query_offset(qname, "reader")
            await consumer.store_offset(qname, "reader", 3)
            return await consumer.query_offset(qname, "reader")

    assert _run(store()) == 3
    fresh_roost.stop()
    fresh_roost.start()

    async def query() -> int:
        async with _consumer(fresh_roost) as consumer:
            return await consumer.query_offset(qname, "reader")

    assert _run(query()) == 3


def test_metadata_and_errors_for_a_missing_stream(roost: RoostProcess, qname: str) -> None:
    async def main() -> tuple[bool, bool]:
        async with _producer(roost) as producer:
            before = await producer.stream_exists(qname)
            await producer.create_stream(qname)
            after = await producer.stream_exists(qname)
            await producer.delete_stream(qname)
            with pytest.raises(StreamDoesNotExist):
                await producer.delete_stream(qname)
        async with _consumer(roost) as consumer:
            with pytest.raises(StreamDoesNotExist):
                await consumer.subscribe(qname, lambda m, ctx: None)
        return before, after

    assert _run(main()) == (False, True)


def test_amqp_published_messages_read_over_the_stream_protocol(
    roost: RoostProcess, qname: str
) -> None:
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(qname, durable=True, arguments={"x-queue-type": "stream"})
        props = pika.BasicProperties(
            content_type="text/plain", headers={"k": "v", "n": 7}, message_id="id-1"
        )
        ch.basic_publish("", qname, b"from amqp", props)
    got = _run(_read(roost, qname, ConsumerOffsetSpecification(OffsetType.FIRST), 1))
    message = amqp_decoder(got[0][1])
    assert message.body == b"from amqp"
    assert message.application_properties == {b"k": b"v", b"n": 7}
    assert message.properties.content_type == b"text/plain"
    assert message.properties.message_id == b"id-1"


def test_stream_protocol_messages_read_over_amqp(roost: RoostProcess, qname: str) -> None:
    async def publish() -> None:
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            await producer.send_wait(
                qname,
                AMQPMessage(
                    body=b"from rstream",
                    properties=Properties(content_type="text/plain", correlation_id="c-1"),
                    application_properties={"k": "v"},
                ),
            )

    _run(publish())
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=10)
        got: list[tuple[Any, bytes]] = []
        ch.basic_consume(
            qname,
            lambda ch_, m, p, body: got.append((p, body)),
            arguments={"x-stream-offset": "first"},
        )
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            conn.process_data_events(0.05)
    props, body = got[0]
    assert body == b"from rstream"
    assert props.content_type == "text/plain"
    assert props.correlation_id == "c-1"
    assert props.headers["k"] == "v"
    assert props.headers["x-stream-offset"] == 0


def test_credit_bounds_what_a_consumer_receives(roost: RoostProcess, qname: str) -> None:
    """With one credit and a callback that never returns credit, one chunk arrives."""

    async def main() -> tuple[int, int]:
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            await producer.send_batch(qname, [b"x"] * 3000)
            await asyncio.sleep(0.3)
        raw = await _raw_session(roost.stream_port)
        try:
            return await raw.subscribe_and_count(qname, credit=1)
        finally:
            await raw.close()

    chunks, records = _run(main())
    assert chunks == 1
    assert 0 < records < 3000


def test_a_bad_frame_closes_only_its_connection(roost: RoostProcess, qname: str) -> None:
    async def main() -> tuple[Any, list[tuple[int, bytes]]]:
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            # an unknown command key on another connection, mid-session
            raw = await _raw_session(roost.stream_port)
            raw.writer.write(struct.pack(">IHH", 4, 0x7777, 1))
            closed = None
            while True:
                frame = await raw.next()
                if frame is None or isinstance(frame, Close):
                    closed = frame
                    break
            eof = await raw.reader.read()
            await raw.close()
            await producer.send_wait(qname, b"still fine")
        got = await _read(roost, qname, ConsumerOffsetSpecification(OffsetType.FIRST), 1)
        return (closed, eof), got

    (closed, eof), got = _run(main())
    assert isinstance(closed, Close) and closed.code == c.UNKNOWN_FRAME
    assert eof == b""
    assert got == [(0, b"still fine")]


def test_a_frame_before_authentication_and_bad_credentials(roost: RoostProcess) -> None:
    """A command before the handshake is refused with UNKNOWN_FRAME; a wrong password
    gets AUTHENTICATION_FAILURE and the connection is closed."""
    with socket.create_connection(("127.0.0.1", roost.stream_port), timeout=5) as sock:
        from roost.stream_protocol.frames import Metadata

        sock.sendall(encode(Metadata(1, ["x"])))
        reader = FrameReader(role="client")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        reader.feed(data)
        frames = reader.frames()
        assert isinstance(frames[0], Close) and frames[0].code == c.UNKNOWN_FRAME

    with socket.create_connection(("127.0.0.1", roost.stream_port), timeout=5) as sock:
        from roost.stream_protocol.frames import SaslAuthenticate, SaslHandshake

        sock.sendall(
            encode(PeerProperties(1, {}))
            + encode(SaslHandshake(2))
            + encode(SaslAuthenticate(3, "PLAIN", b"\x00guest\x00wrong"))
        )
        reader = FrameReader(role="client")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        reader.feed(data)
        frames = reader.frames()
    auth = next(f for f in frames if type(f).__name__ == "SaslAuthenticateResponse")
    assert auth.response_code == c.AUTHENTICATION_FAILURE
    assert isinstance(frames[-1], Close) and frames[-1].code == c.AUTHENTICATION_FAILURE


def test_single_active_consumer_fails_over_to_the_waiting_one(
    roost: RoostProcess, qname: str
) -> None:
    """Two subscriptions named alike with single-active-consumer: only the first reads;
    when its connection closes, the second is told (ConsumerUpdate), answers with its
    offset (here: next) and reads from there."""
    from rstream import OffsetSpecification

    async def main() -> tuple[Got, Got, list[bool]]:
        first: Got = []
        second: Got = []
        updates: list[bool] = []

        async def listener(active: bool, ctx: Any) -> OffsetSpecification:
            updates.append(active)
            return OffsetSpecification(OffsetType.NEXT, 0)

        sac = {"single-active-consumer": "true", "name": "grp"}
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            one, two = _consumer(roost), _consumer(roost)
            await one.start()
            await two.start()
            await one.subscribe(qname, lambda m, ctx: first.append((ctx.offset, m)),
                                properties=sac, subscriber_name="grp",
                                offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST))
            await two.subscribe(qname, lambda m, ctx: second.append((ctx.offset, m)),
                                properties=sac, subscriber_name="grp",
                                consumer_update_listener=listener)
            await producer.send_batch(qname, [b"a", b"b"])
            await _until(lambda: len(first) == 2, "the active consumer's messages")
            await asyncio.sleep(0.1)
            assert second == [] and updates == []
            await one.close()
            await _until(lambda: updates == [True], "the second one made active")
            await asyncio.sleep(0.05)
            await producer.send_batch(qname, [b"c"])
            await _until(lambda: len(second) == 1, "the new active consumer's message")
            await two.close()
        return first, second, updates

    first, second, updates = _run(main())
    assert first == [(0, b"a"), (1, b"b")]
    assert second == [(2, b"c")]
    assert updates == [True]


def test_deleting_a_stream_tells_its_consumers(roost: RoostProcess, qname: str) -> None:
    """MetadataUpdate (stream not available) reaches a subscriber of a deleted stream."""

    async def main() -> list[Any]:
        raw = await _raw_session(roost.stream_port)
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            from roost.stream_protocol.frames import OffsetSpec, Subscribe

            await raw.send(Subscribe(5, 1, qname, OffsetSpec(c.OFFSET_FIRST), 10))
            first = await raw.next()
            await producer.delete_stream(qname)
            second = await raw.next()
        await raw.close()
        return [first, second]

    subscribed, update = _run(main())
    assert subscribed.response_code == c.OK
    assert type(update).__name__ == "MetadataUpdate"
    assert (update.code, update.stream) == (c.STREAM_NOT_AVAILABLE, qname)


def test_stomp_reads_what_the_stream_protocol_wrote_and_the_reverse(
    roost: RoostProcess, qname: str
) -> None:
    import threading

    import stomp

    async def publish() -> None:
        async with _producer(roost) as producer:
            await producer.create_stream(qname)
            await producer.send_wait(
                qname,
                AMQPMessage(body=b"from rstream", application_properties={"k": "v"}),
            )

    _run(publish())
    frames: list[Any] = []
    arrived = threading.Event()

    class Collect(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            frames.append(frame)
            arrived.set()

    conn = stomp.Connection12([("127.0.0.1", roost.stomp_port)], heartbeats=(0, 0))
    conn.set_listener("collect", Collect())
    conn.connect("guest", "guest", wait=True)
    try:
        conn.subscribe(f"/amq/queue/{qname}", id="s", ack="client-individual",
                       headers={"prefetch-count": "10", "x-stream-offset": "first"})
        assert arrived.wait(10)
        conn.send(f"/amq/queue/{qname}", "from stomp", headers={"h": "1"})
        deadline = time.monotonic() + 10
        while len(frames) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        conn.disconnect()
    assert frames[0].body == "from rstream" and frames[0].headers["k"] == "v"
    got = _run(_read(roost, qname, ConsumerOffsetSpecification(OffsetType.FIRST), 2))
    second = amqp_decoder(got[1][1])
    assert second.body == b"from stomp"
    assert second.application_properties[b"h"] == b"1"


def test_publish_v2_with_filter_values_is_accepted(roost: RoostProcess, qname: str) -> None:
    """rstream sends Publish version 2 (a filter value per message) once the broker says
    it speaks it (ExchangeCommandVersions); the messages are stored and confirmed."""

    async def extract(message: Any) -> str:
        return "eu"

    async def main() -> Got:
        async with _producer(roost, filter_value_extractor=extract) as producer:
            await producer.create_stream(qname)
            await producer.send_wait(qname, AMQPMessage(body=b"filtered"))
        return await _read(roost, qname, ConsumerOffsetSpecification(OffsetType.FIRST), 1)

    got = _run(main())
    assert amqp_decoder(got[0][1]).body == b"filtered"
