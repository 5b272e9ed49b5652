"""/api/connections, /api/channels, /api/consumers: what AMQP clients are doing, and
closing a connection with a reason."""

from __future__ import annotations

import threading
import time

import httpx
import pika
import pytest

from tests.http.conftest import json_of, quote
from tests.support import RoostProcess, eventually


@pytest.fixture
def named(mgmt: RoostProcess, name: str):  # type: ignore[no-untyped-def]
    params = pika.URLParameters(mgmt.url)
    params.client_properties = {"connection_name": name}
    conn = pika.BlockingConnection(params)
    yield conn
    if conn.is_open:
        conn.close()


def _mine(http: httpx.Client, name: str) -> dict:
    return eventually(
        lambda: next(
            (c for c in json_of(http.get("/api/connections")) if c["user_provided_name"] == name),
            None,
        )
    )


def test_list_and_get(http: httpx.Client, named: pika.BlockingConnection, name: str) -> None:
    ch = named.channel()
    ch.basic_qos(prefetch_count=5)
    conn = _mine(http, name)
    assert (conn["user"], conn["vhost"], conn["protocol"], conn["state"]) == (
        "guest",
        "/",
        "AMQP 0-9-1",
        "running",
    )
    assert conn["client_properties"]["product"] == "Pika Python Client Library"
    assert conn["recv_oct"] > 0 and conn["send_oct"] > 0  # the handshake was counted
    one = json_of(http.get(f"/api/connections/{quote(conn['name'])}"))
    assert one["name"] == conn["name"] and one["channels"] == 1
    assert json_of(http.get("/api/vhosts/%2F/connections"))
    channels = json_of(http.get(f"/api/connections/{quote(conn['name'])}/channels"))
    assert [(c["number"], c["prefetch_count"]) for c in channels] == [(1, 5)]
    chan = json_of(http.get(f"/api/channels/{quote(channels[0]['name'])}"))
    assert chan["connection_details"]["name"] == conn["name"]
    assert channels[0]["name"] in {c["name"] for c in json_of(http.get("/api/channels"))}
    assert channels[0]["name"] in {c["name"] for c in json_of(http.get("/api/vhosts/%2F/channels"))}


def test_consumers(http: httpx.Client, named: pika.BlockingConnection, name: str) -> None:
    ch = named.channel()
    ch.queue_declare(name, exclusive=True)
    ch.basic_consume(name, lambda *a: None, consumer_tag=f"ctag-{name}")
    found = eventually(
        lambda: [c for c in json_of(http.get("/api/consumers/%2F")) if c["queue"]["name"] == name]
    )
    assert found[0]["consumer_tag"] == f"ctag-{name}" and found[0]["ack_required"]
    assert found[0]["channel_details"]["number"] == 1
    assert found[0] in json_of(http.get("/api/consumers"))
    q = json_of(http.get(f"/api/queues/%2F/{name}"))
    assert (
        q["exclusive"]
        and q["owner_pid_details"]["name"] == found[0]["channel_details"]["connection_name"]
    )


def test_close_with_reason(http: httpx.Client, named: pika.BlockingConnection, name: str) -> None:
    conn = _mine(http, name)
    r = http.delete(f"/api/connections/{quote(conn['name'])}", headers={"X-Reason": "maintenance"})
    assert r.status_code == 204
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        named.channel()
        named.process_data_events(time_limit=2)
    assert info.value.reply_code == 320 and "maintenance" in info.value.reply_text
    closed = eventually(
        lambda: [
            c
            for c in json_of(http.get("/api/connections", params={"state": "closed"}))
            if c["name"] == conn["name"]
        ]
    )
    assert "maintenance" in closed[0]["closed_reason"]


def test_errors(http: httpx.Client) -> None:
    assert http.get("/api/connections/127.0.0.1:1").status_code == 404
    assert http.delete("/api/connections/127.0.0.1:1").status_code == 404
    assert http.get("/api/channels/nope (1)").status_code == 404
    assert http.get("/api/consumers/nope").status_code == 404
    assert http.get("/api/vhosts/nope/connections").status_code == 404


def test_channel_modes(http: httpx.Client, named: pika.BlockingConnection, name: str) -> None:
    """A channel's `confirm` and `transactional` say what the client selected, as
    RabbitMQ's /api/channels does."""
    plain, confirming, transacting = named.channel(), named.channel(), named.channel()
    confirming.confirm_delivery()
    transacting.tx_select()
    conn = _mine(http, name)
    channels = json_of(http.get(f"/api/connections/{quote(conn['name'])}/channels"))
    modes = {c["number"]: (c["confirm"], c["transactional"]) for c in channels}
    assert modes == {
        plain.channel_number: (False, False),
        confirming.channel_number: (True, False),
        transacting.channel_number: (False, True),
    }


def test_messages_unconfirmed_counts_publishes_waiting_for_their_fsync(
    slow_sync: RoostProcess, qname: str
) -> None:
    """A persistent publish to a durable queue is confirmed after the fsync (every
    1.5 s on this broker): meanwhile the channel shows it in ``messages_unconfirmed``,
    as RabbitMQ's /api/channels does, and 0 once it is confirmed."""
    params = pika.URLParameters(slow_sync.url)
    params.client_properties = {"connection_name": qname}
    done = threading.Event()
    confirmed = []

    def publish() -> None:  # pika's blocking publish waits for each confirm
        with pika.BlockingConnection(params) as conn:
            ch = conn.channel()
            ch.queue_declare(qname, durable=True)
            ch.confirm_delivery()
            while not done.is_set() and len(confirmed) < 10:
                ch.basic_publish("", qname, b"x", pika.BasicProperties(delivery_mode=2))
                confirmed.append(1)

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    seen: set[int] = set()
    with httpx.Client(base_url=slow_sync.http_url, auth=("guest", "guest"), timeout=10) as http:
        try:
            while thread.is_alive() and 1 not in seen:
                for ch in json_of(http.get("/api/channels")):
                    if ch["confirm"]:  # the broker is this test's own
                        seen.add(ch["messages_unconfirmed"])
                time.sleep(0.02)
        finally:
            done.set()
            thread.join(10)
        assert 1 in seen, f"never saw the waiting publish: {seen}"
        assert len(confirmed) < 10  # seen while the publisher still waited
        assert eventually(lambda: not json_of(http.get("/api/channels")))  # it left
