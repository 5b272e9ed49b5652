"""The broker's own traffic events (--events-stream): what a known sequence of client
operations records, nothing when the setting is off, nothing about the events stream
itself, and a reader that never acks holds nobody up."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pika
import pika.exceptions
import pytest

from tests.stream.conftest import query, read
from tests.support import RoostProcess, running

EVENTS = "roost.events"
Event = dict[str, Any]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    data = tmp_path_factory.mktemp("events")
    yield from running(RoostProcess(data, "--events-stream", EVENTS))


def connect(server: RoostProcess | str, name: str) -> pika.BlockingConnection:
    params = pika.URLParameters(server if isinstance(server, str) else server.url)
    params.client_properties = {"connection_name": name}
    return pika.BlockingConnection(params)


def event_batches(server: RoostProcess | str) -> list[tuple[dict[str, Any], list[Event]]]:
    """Every message the broker wrote to the events stream: (its headers, its events).
    Anything else published there (a test does) is skipped."""
    with connect(server, "events-reader") as conn:
        ch = conn.channel()
        total = query(ch, EVENTS)["x-stream-next-offset"]
        out: list[tuple[dict[str, Any], list[Event]]] = []
        seen = 0

        def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
            nonlocal seen
            seen += 1
            if props.type == "roost.events":
                assert props.content_type == "application/json"
                out.append((dict(props.headers), json.loads(body)))
            c.basic_ack(method.delivery_tag)

        ch.basic_qos(prefetch_count=100)
        ch.basic_consume(
            EVENTS, on_message, arguments={"x-stream-offset": "first", "x-stream-end-offset": total}
        )
        deadline = time.monotonic() + 10
        while seen < total and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        assert seen == total
        return out


def events_until(
    server: RoostProcess | str, done: Callable[[list[Event]], bool], timeout: float = 10.0
) -> list[Event]:
    """All events so far, once ``done(events)`` holds (events are written in batches,
    at most about 0.1 s after they happen)."""
    deadline = time.monotonic() + timeout
    while True:
        events = [e for _headers, batch in event_batches(server) for e in batch]
        if done(events) or time.monotonic() > deadline:
            return events
        time.sleep(0.1)


def closed(name: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(
        e["type"] == "connection.closed" and e["connection"] == name for e in events
    )


def strip(event: Event) -> Event:
    """An event without the fields a test cannot know in advance."""
    return {k: v for k, v in event.items() if k not in ("ts", "peer", "duration_ms")}


def test_known_operations_record_their_events(server: RoostProcess) -> None:
    start_ms = time.time() * 1000
    conn = connect(server, "ops")
    ch = conn.channel()
    ch.exchange_declare("ops.dlx", "fanout")
    ch.queue_declare("ops.dead")
    ch.queue_bind("ops.dead", "ops.dlx")
    ch.queue_declare("ops.q", arguments={"x-dead-letter-exchange": "ops.dlx"})
    for i, size in enumerate((10, 20, 30), 1):
        props = pika.BasicProperties(message_id=f"m{i}", timestamp=1_700_000_000 + i)
        ch.basic_publish("", "ops.q", b"x" * size, props)
    ch.basic_publish("amq.topic", "nowhere", b"lost")
    method, _props, _body = ch.basic_get("ops.q")
    assert method is not None
    ch.basic_ack(method.delivery_tag)
    ch.basic_qos(prefetch_count=1)
    seen: list[bytes] = []

    def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
        seen.append(body)
        if len(seen) == 1:
            c.basic_ack(method.delivery_tag)
        else:  # the third message: rejected, so dead-lettered to ops.dead
            c.basic_reject(method.delivery_tag, requeue=False)

    tag = ch.basic_consume("ops.q", on_message, consumer_tag="worker")
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    ch.basic_cancel(tag)
    ch.queue_delete("ops.q")
    ch.queue_delete("ops.dead")
    conn.close()
    end_ms = time.time() * 1000

    events = events_until(server, closed("ops"))
    ours = []
    conn_names = {"ops"}
    for e in events:
        if e["type"].startswith("connection."):
            if e["connection"] in conn_names:
                ours.append(e)
        elif e.get("queue", "").startswith("ops.") or e.get("routing_key") in ("ops.q", "nowhere"):
            ours.append(e)
    queue_fields = {"kind": "classic", "durable": False, "exclusive": False, "auto_delete": False}
    published = {"exchange": "", "routing_key": "ops.q", "routed": 1, "persistent": False}
    assert [strip(e) for e in ours] == [
        {"type": "connection.created", "connection": "ops", "user": "guest",
         "protocol": "AMQP 0-9-1", "client": "Pika Python Client Library"},
        {"type": "queue.created", "queue": "ops.dead", **queue_fields, "arguments": {}},
        {"type": "queue.created", "queue": "ops.q", **queue_fields,
         "arguments": {"x-dead-letter-exchange": "ops.dlx"}},
        {"type": "message.published", **published, "queues": {"ops.q": 1}, "size": 10,
         "message_id": "m1", "timestamp": 1_700_000_001},
        {"type": "message.published", **published, "queues": {"ops.q": 2}, "size": 20,
         "message_id": "m2", "timestamp": 1_700_000_002},
        {"type": "message.published", **published, "queues": {"ops.q": 3}, "size": 30,
         "message_id": "m3", "timestamp": 1_700_000_003},
        {"type": "message.published", "exchange": "amq.topic", "routing_key": "nowhere",
         "queues": {}, "routed": 0, "size": 4, "persistent": False},
        {"type": "message.delivered", "queue": "ops.q", "seq": 1, "size": 10,
         "redelivered": False, "auto_ack": False},
        {"type": "message.acked", "queue": "ops.q", "seq": 1},
        {"type": "message.delivered", "queue": "ops.q", "seq": 2, "size": 20,
         "redelivered": False, "auto_ack": False, "consumer": "worker"},
        {"type": "message.acked", "queue": "ops.q", "seq": 2},
        {"type": "message.delivered", "queue": "ops.q", "seq": 3, "size": 30,
         "redelivered": False, "auto_ack": False, "consumer": "worker"},
        {"type": "message.rejected", "queue": "ops.q", "seq": 3, "requeue": False},
        {"type": "message.dead_lettered", "queue": "ops.q", "reason": "rejected",
         "exchange": "ops.dlx", "routing_key": "ops.q", "routed": 1, "size": 30,
         "message_id": "m3"},
        {"type": "queue.deleted", "queue": "ops.q", **queue_fields,
         "arguments": {"x-dead-letter-exchange": "ops.dlx"}},
        {"type": "queue.deleted", "queue": "ops.dead", **queue_fields, "arguments": {}},
        {"type": "connection.closed", "connection": "ops", "user": "guest",
         "protocol": "AMQP 0-9-1", "reason": "client closed the connection (200 'Normal shutdown')",
         "recv_oct": ours[-1]["recv_oct"], "send_oct": ours[-1]["send_oct"]},
    ]
    stamps = [e["ts"] for e in ours]
    assert stamps == sorted(stamps)
    assert start_ms - 1 <= stamps[0] and stamps[-1] <= end_ms + 1
    # sizes of the connection: what pika sent (frames of three publishes and more) and got
    assert ours[-1]["recv_oct"] > 10 + 20 + 30 + 4 and ours[-1]["send_oct"] > 0
    assert ours[-1]["duration_ms"] > 0


def test_event_messages_carry_counts_and_the_run(server: RoostProcess) -> None:
    with connect(server, "batch") as conn:
        conn.channel().queue_declare("batch.q")
    events_until(server, closed("batch"))
    batches = event_batches(server)
    runs = {headers["x-roost-run"] for headers, _ in batches}
    assert len(runs) == 1 and int(runs.pop()) > 1_600_000_000_000
    for headers, batch in batches:
        assert headers["x-roost-events"] == len(batch) >= 1


def test_nothing_is_recorded_about_the_events_stream(server: RoostProcess) -> None:
    with connect(server, "self") as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.basic_publish("", EVENTS, json.dumps([{"type": "fake"}]).encode())
        read(conn, ch, EVENTS, 2, {"x-stream-offset": "first", "x-stream-consumer-name": "me"})
        ch.basic_get(EVENTS, auto_ack=True)  # the offset query
    events = events_until(server, closed("self"))
    assert not [e for e in events if EVENTS in (e.get("queue"), e.get("routing_key"))]
    assert not [e for e in events if EVENTS in e.get("queues", {})]


def test_a_reader_that_never_acks_holds_no_publisher_up(server: RoostProcess) -> None:
    lazy = connect(server, "lazy-reader")
    lazy_ch = lazy.channel()
    lazy_ch.basic_qos(prefetch_count=1)
    lazy_ch.basic_consume(EVENTS, lambda *a: None, arguments={"x-stream-offset": "first"})
    lazy.process_data_events(time_limit=0.1)
    before = events_count(server)
    with connect(server, "busy") as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("busy.q")
        started = time.monotonic()
        for _ in range(2000):
            ch.basic_publish("", "busy.q", b"payload")  # each waits for its confirm
        assert time.monotonic() - started < 60
        assert ch.queue_declare("busy.q", passive=True).method.message_count == 2000
    lazy.close()
    # the events of all 2000 publishes reached the stream all the same
    events = events_until(server, closed("busy"))
    assert len([e for e in events if e.get("routing_key") == "busy.q"]) == 2000
    assert events_count(server) > before


def events_count(server: RoostProcess) -> int:
    return sum(len(batch) for _headers, batch in event_batches(server))


def test_off_by_default(roost: RoostProcess) -> None:
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        ch.queue_declare("off.q")
        ch.basic_publish("", "off.q", b"x")
        assert ch.basic_get("off.q", auto_ack=True)[0] is not None
        ch.queue_delete("off.q")
    time.sleep(0.3)  # longer than the events' batching delay: they would be written by now
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as conn:
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as err:
            ch.queue_declare(EVENTS, passive=True)
        assert err.value.reply_code == 404


def test_every_vhost_gets_its_own_stream(server: RoostProcess) -> None:
    import httpx

    auth = ("guest", "guest")
    assert httpx.put(f"{server.http_url}/api/vhosts/tenant", auth=auth).status_code == 201
    rights = {"configure": ".*", "write": ".*", "read": ".*"}
    put = httpx.put(f"{server.http_url}/api/permissions/tenant/guest", json=rights, auth=auth)
    assert put.status_code in (201, 204)  # the creator may have them already
    url = f"amqp://guest:guest@127.0.0.1:{server.amqp_port}/tenant"
    with connect(url, "tenant") as conn:
        ch = conn.channel()
        ch.queue_declare("tenant.q")
        ch.basic_publish("", "tenant.q", b"hello")
    events = events_until(url, closed("tenant"))
    published = [e for e in events if e["type"] == "message.published"]
    assert [(e["routing_key"], e["queues"]) for e in published] == [("tenant.q", {"tenant.q": 1})]
    # and nothing of the tenant's traffic is in the default vhost's stream
    default = [e for _h, batch in event_batches(server) for e in batch]
    assert not [e for e in default if "tenant.q" in (e.get("queue"), e.get("routing_key"))]
    assert not [e for e in default if e.get("connection") == "tenant"]


def test_sample_traffic_fills_the_events_stream(server: RoostProcess) -> None:
    from roost.pipeline.traffic_sample import FLOWS, generate_traffic

    counts = generate_traffic(server.url, 4.0, 100.0, EVENTS)
    assert counts["published"] > 100
    events = events_until(server, lambda evs: sum(
        e["type"] == "queue.deleted" and e["queue"] == "shop.dead" for e in evs) == 1)
    published = [e for e in events if e["type"] == "message.published" and e["exchange"] == "shop"]
    assert len(published) == counts["published"]
    assert len({e["routing_key"] for e in published}) >= 5
    # every flow's queue was fed, consumed and acked, then deleted at the end
    for flow in FLOWS:
        mine = [e for e in events if e.get("queue") == flow.queue]
        kinds = {e["type"] for e in mine}
        assert {"queue.created", "message.delivered", "queue.deleted"} <= kinds, flow.queue
    shop = [e for e in events if e.get("queue", "").startswith("shop.")]
    rejected = [e for e in shop if e["type"] == "message.rejected"]
    assert len(rejected) == counts["rejected"]
    acks = [e for e in shop if e["type"] == "message.acked"]
    assert 0 < len(acks) <= counts["processed"]  # those still in hand at the end requeue
    assert {e["queue"] for e in acks} == {flow.queue for flow in FLOWS}
    assert sum(e["type"] == "connection.created" and e.get("client") == "roost-traffic-sample"
               for e in events) >= 6  # the consumers, the publisher, the short-lived ones
