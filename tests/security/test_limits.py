"""Limits: connections (whole broker, per vhost, per user), channels per user, queues and
exchanges per vhost, consumers per channel, HTTP body size; failed logins logged and throttled. Each
breach gets RabbitMQ's error (texts as RabbitMQ 3.10.8 sends them; the per-channel
consumer limit as RabbitMQ's rabbit_channel words it) and the broker serves others on."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest
import stomp
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker

from roost.amqp import codec_methods as m
from roost.amqp.codec import encode_method_frame
from tests.security.abusers import RawPeer
from tests.security.conftest import amqp_as, put
from tests.stomp.conftest import Inbox
from tests.support import RoostProcess, running, running_server


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    yield from running(
        RoostProcess(
            tmp_path_factory.mktemp("limits"),
            "--consumer-max-per-channel", "2",
            "--http-max-body-size", "4096",
        )
    )


@pytest.fixture
def api(limited: RoostProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=limited.http_url + "/api", auth=("guest", "guest")) as client:
        yield client


def new_vhost(api: httpx.Client, **limits: int) -> str:
    name = f"lim-{os.urandom(3).hex()}"
    put(api, f"/vhosts/{name}", {})
    put(api, f"/permissions/{name}/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    for key, value in limits.items():
        put(api, f"/vhost-limits/{name}/{key.replace('_', '-')}", {"value": value})
    return name


def new_user(api: httpx.Client, **limits: int) -> str:
    name = f"ul-{os.urandom(3).hex()}"
    put(api, f"/users/{name}", {"password": "pw", "tags": ""})
    put(api, f"/permissions/%2F/{name}", {"configure": ".*", "write": ".*", "read": ".*"})
    for key, value in limits.items():
        put(api, f"/user-limits/{name}/{key.replace('_', '-')}", {"value": value})
    return name


def guest(server: RoostProcess, vhost: str = "%2F") -> pika.BlockingConnection:
    return amqp_as(server, "guest", "guest", vhost)


def refusal(server: RoostProcess, user: str, password: str, vhost: str) -> str:
    """The connection.close pika reports for a refused connection.open: 'CODE TEXT'."""
    with pytest.raises(pika.exceptions.AMQPConnectionError) as err:
        amqp_as(server, user, password, vhost)
    # pika keeps only the repr of the close: ConnectionClosedByBroker: (530) "TEXT"
    found = re.search(r"\((\d+)\) [\"'](.*)[\"']$", str(err.value.args[0]))
    assert found is not None, err.value
    return f"{found[1]} {found[2]}"


def stomp_as(server: RoostProcess, user: str = "guest", password: str = "guest",
             vhost: str = "/") -> tuple[stomp.Connection12, Inbox]:
    conn = stomp.Connection12([("127.0.0.1", server.stomp_port)], vhost=vhost)
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    conn.connect(user, password, wait=True)
    return conn, inbox


def stomp_refusal(server: RoostProcess, user: str, password: str, vhost: str = "/") -> Any:
    """The ERROR frame a refused STOMP CONNECT gets."""
    conn = stomp.Connection12([("127.0.0.1", server.stomp_port)], vhost=vhost)
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect(user, password, wait=True)
    return inbox.errors.get(timeout=5)


# -- vhost limits ---------------------------------------------------------------------------


def test_vhost_limits_api_shape(api: httpx.Client) -> None:
    vhost = new_vhost(api, max_connections=5, max_queues=7)
    assert api.get(f"/vhost-limits/{vhost}").json() == [
        {"vhost": vhost, "value": {"max-connections": 5, "max-queues": 7}}
    ]
    assert {"vhost": vhost, "value": {"max-connections": 5, "max-queues": 7}} in api.get(
        "/vhost-limits"
    ).json()
    assert api.delete(f"/vhost-limits/{vhost}/max-queues").status_code == 204
    assert api.get(f"/vhost-limits/{vhost}").json()[0]["value"] == {"max-connections": 5}
    bad = api.put(f"/vhost-limits/{vhost}/max-bananas", json={"value": 1})
    assert bad.status_code == 400


def test_vhost_connection_limit(limited: RoostProcess, api: httpx.Client) -> None:
    vhost = new_vhost(api, max_connections=1)
    with guest(limited, vhost):
        text = refusal(limited, "guest", "guest", vhost)
        assert text == (
            f"530 NOT_ALLOWED - access to vhost '{vhost}' refused for user 'guest': "
            "connection limit (1) is reached"
        )
        with guest(limited) as other:  # another vhost is not affected
            assert other.is_open
        # STOMP counts too: its CONNECT gets an ERROR
        conn = stomp.Connection12([("127.0.0.1", limited.stomp_port)], vhost=vhost)
        inbox = Inbox()
        conn.set_listener("inbox", inbox)
        with pytest.raises(stomp.exception.ConnectFailedException):
            conn.connect("guest", "guest", wait=True)
        err = inbox.errors.get(timeout=5)
        assert err.headers["message"] == "not_allowed"
        assert "connection limit (1) is reached" in err.body
    with guest(limited, vhost) as again:  # room again once the first is gone
        assert again.is_open


def test_vhost_queue_limit(limited: RoostProcess, api: httpx.Client) -> None:
    vhost = new_vhost(api, max_queues=1)
    with guest(limited, vhost) as conn:
        ch = conn.channel()
        ch.queue_declare("q1")
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.queue_declare("q2")
        assert err.value.reply_code == 406
        assert err.value.reply_text == (
            f"PRECONDITION_FAILED - cannot declare queue 'q2': queue limit in vhost "
            f"'{vhost}' (1) is reached"
        )
        ch = conn.channel()
        ch.queue_declare("q1")  # redeclaring an existing queue is fine at the limit
        ch.queue_delete("q1")
        ch.queue_declare("q2")  # room again
    # the HTTP API is held to it too
    reply = api.put(f"/queues/{vhost}/q3", json={"durable": False})
    assert reply.status_code == 400 and "queue limit" in reply.json()["reason"]
    # and STOMP, whose SEND to /queue/NAME declares the queue
    conn, inbox = stomp_as(limited, vhost=vhost)
    conn.send("/amq/queue/q2", "to the existing queue (no declare)", receipt="r1")
    assert inbox.receipt() == "r1"
    conn.send("/queue/new", "declares a second queue")
    err = inbox.errors.get(timeout=5)
    assert err.headers["message"] == "precondition_failed"
    assert err.body == (
        f"PRECONDITION_FAILED - cannot declare queue 'new': queue limit in vhost '{vhost}' "
        "(1) is reached"
    )


def test_vhost_exchange_limit(limited: RoostProcess, api: httpx.Client) -> None:
    """max-exchanges (Roost's; RabbitMQ 3.10 has only max-queues) mirrors the queue limit.
    The default exchange and the amq.* ones every vhost has do not count."""
    vhost = new_vhost(api, max_exchanges=2)
    with guest(limited, vhost) as conn:
        ch = conn.channel()
        ch.exchange_declare("e1")
        ch.exchange_declare("e2", "topic")
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.exchange_declare("e3")
        assert err.value.reply_code == 406
        assert err.value.reply_text == (
            f"PRECONDITION_FAILED - cannot declare exchange 'e3': exchange limit in vhost "
            f"'{vhost}' (2) is reached"
        )
        assert conn.is_open  # only the channel closed
        ch = conn.channel()
        ch.exchange_declare("e1")  # redeclaring an existing exchange is fine at the limit
        ch.exchange_declare("amq.direct", "direct", passive=True)
        ch.queue_declare("q")  # queues are not exchanges
        ch.exchange_delete("e1")
        ch.exchange_declare("e3")  # room again
    reply = api.put(f"/exchanges/{vhost}/e4", json={"type": "direct"})
    assert reply.status_code == 400
    assert reply.json() == {
        "error": "bad_request",
        "reason": f"cannot declare exchange 'e4': exchange limit in vhost '{vhost}' (2) is reached",
    }
    redeclared = api.put(f"/exchanges/{vhost}/e2", json={"type": "topic", "durable": False})
    assert redeclared.status_code == 204
    assert api.get(f"/vhost-limits/{vhost}").json() == [
        {"vhost": vhost, "value": {"max-exchanges": 2}}
    ]
    exported = api.get("/definitions").json()
    assert {
        "vhost": vhost,
        "component": "vhost-limits",
        "name": "limits",
        "value": {"max-exchanges": 2},
    } in exported["parameters"]


def test_vhost_limits_survive_a_restart(tmp_path: Path) -> None:
    """Limits are saved and restored; objects made before a limit was lowered below their
    count come back too (RabbitMQ limits declares on a channel, not what it imports)."""
    server = RoostProcess(tmp_path / "data").start()
    try:
        with guest(server) as conn:
            ch = conn.channel()
            for n in range(3):
                ch.queue_declare(f"kept-q{n}", durable=True)
                ch.exchange_declare(f"kept-x{n}", durable=True)
        with httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest")) as api:
            put(api, "/vhost-limits/%2F/max-queues", {"value": 1})
            put(api, "/vhost-limits/%2F/max-exchanges", {"value": 1})
            user = new_user(api, max_channels=4)
        assert server.stop() == 0  # a graceful stop saves the definitions
        server.start()
        with httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest")) as api:
            assert api.get("/vhost-limits/%2F").json() == [
                {"vhost": "/", "value": {"max-queues": 1, "max-exchanges": 1}}
            ]
            assert api.get(f"/user-limits/{user}").json() == [
                {"user": user, "value": {"max-channels": 4}}
            ]
            queues = {q["name"] for q in api.get("/queues/%2F").json()}
            exchanges = {x["name"] for x in api.get("/exchanges/%2F").json()}
        assert {"kept-q0", "kept-q1", "kept-q2"} <= queues
        assert {"kept-x0", "kept-x1", "kept-x2"} <= exchanges
        with guest(server) as conn:  # still over the limits: new ones are refused
            with pytest.raises(ChannelClosedByBroker) as err:
                conn.channel().queue_declare("one-more")
            assert err.value.reply_code == 406
            with pytest.raises(ChannelClosedByBroker) as err:
                conn.channel().exchange_declare("one-more")
            assert err.value.reply_code == 406
        assert "Traceback" not in server.log and "import failed" not in server.log, server.log
    finally:
        server.kill()


# -- user limits ----------------------------------------------------------------------------


def test_user_connection_limit(limited: RoostProcess, api: httpx.Client) -> None:
    user = new_user(api, max_connections=1)
    assert api.get(f"/user-limits/{user}").json() == [
        {"user": user, "value": {"max-connections": 1}}
    ]
    with amqp_as(limited, user):
        text = refusal(limited, user, "pw", "%2F")
        assert text == (
            f"530 NOT_ALLOWED - connection refused for user '{user}': user connection "
            "limit (1) is reached"
        )
        with guest(limited) as other:
            assert other.is_open
        # STOMP connections count against the same limit
        err = stomp_refusal(limited, user, "pw")
        assert err.headers["message"] == "not_allowed"
        assert err.body == (
            f"NOT_ALLOWED - connection refused for user '{user}': user connection limit (1) "
            "is reached"
        )
    conn, _ = stomp_as(limited, user, "pw")  # a STOMP connection takes the one slot
    try:
        assert refusal(limited, user, "pw", "%2F").startswith("530 NOT_ALLOWED")
    finally:
        conn.disconnect()


def test_user_channel_limit(limited: RoostProcess, api: httpx.Client) -> None:
    user = new_user(api, max_channels=1)
    conn = amqp_as(limited, user)
    conn.channel()
    with pytest.raises(ConnectionClosedByBroker) as err:
        conn.channel()
    assert err.value.reply_code == 530
    assert err.value.reply_text == (
        f"NOT_ALLOWED - number of channels opened for user '{user}' has reached the "
        "maximum allowed user limit of (1)"
    )
    with amqp_as(limited, user) as again:  # the closed connection freed its channel
        again.channel()


# -- consumers per channel ------------------------------------------------------------------


def test_consumer_limit_per_stomp_connection(limited: RoostProcess, qname: str) -> None:
    """A STOMP connection is one channel: --consumer-max-per-channel holds its
    subscriptions, with the AMQP text in an ERROR frame."""
    conn, inbox = stomp_as(limited)
    conn.subscribe(f"/queue/{qname}", id="1")
    conn.subscribe(f"/topic/{qname}", id="2", receipt="second")
    assert inbox.receipt() == "second"
    conn.subscribe(f"/queue/{qname}", id="3")
    err = inbox.errors.get(timeout=5)
    assert err.headers["message"] == "not_allowed"
    assert err.body == "NOT_ALLOWED - reached maximum (2) of consumers per channel"
    assert inbox.disconnected.get(timeout=5)
    other, other_inbox = stomp_as(limited)  # others are not affected
    other.send(f"/queue/{qname}", "still served", receipt="r")
    assert other_inbox.receipt() == "r"
    other.disconnect()


def test_consumer_limit_per_channel(limited: RoostProcess, qname: str) -> None:
    with guest(limited) as conn:
        ch = conn.channel()
        ch.queue_declare(qname, auto_delete=True)
        ch.basic_consume(qname, lambda *a: None)
        ch.basic_consume(qname, lambda *a: None)
        other = conn.channel()  # the limit is per channel
        other.basic_consume(qname, lambda *a: None)
        with pytest.raises(ConnectionClosedByBroker) as err:
            ch.basic_consume(qname, lambda *a: None)
        assert err.value.reply_code == 530
        assert err.value.reply_text == "NOT_ALLOWED - reached maximum (2) of consumers per channel"
    with guest(limited) as conn:
        assert conn.channel().is_open


# -- per connection: channel_max ------------------------------------------------------------


def test_frame_max_negotiation(tmp_path: Path) -> None:
    """A tune-ok frame_max above --frame-max or below the spec's 4096 closes the connection
    with 530 and the words RabbitMQ 3.10.8 logs (it drops the socket without a close);
    the bystander keeps the offer."""
    with running_server(tmp_path, "--frame-max", "8192") as server, guest(server) as bystander:
        for asked, words in (
            (8193, "higher than the maximum allowed value (8192)"),
            (4095, "lower than the minimum allowed value (4096)"),
        ):
            peer = RawPeer(server.amqp_port, frame_max=asked)
            assert peer.refusal is not None
            assert (peer.refusal.reply_code, peer.refusal.reply_text) == (
                530, f"NOT_ALLOWED - negotiated frame_max = {asked} is {words}"
            )
            assert peer.closed_by_server()
            peer.close()
        # (a smaller one binds the client: tests/integration/test_amqp_wire.py, 501)
        assert bystander._impl.params.frame_max == 8192
        bystander.channel().queue_declare("", exclusive=True)


def test_channel_max(tmp_path: Path) -> None:
    """--channel-max is offered in connection.tune; a channel past it closes the connection
    with RabbitMQ 3.10.8's 530 and words, and so does a tune-ok asking for more."""
    with running_server(tmp_path, "--channel-max", "3") as server, guest(server) as bystander:
        peer = RawPeer(server.amqp_port)
        for ch in (1, 2, 3):
            peer.open_channel(ch)
        peer.send(encode_method_frame(4, m.ChannelOpen()))
        close = peer.expect(m.ConnectionClose)
        assert (close.reply_code, close.reply_text) == (
            530,
            "NOT_ALLOWED - number of channels opened (3) has reached the negotiated "
            "channel_max (3)",
        )
        peer.close()
        # RabbitMQ 3.10.8 counts channels, whatever their numbers (aiormq opens 65535)
        peer = RawPeer(server.amqp_port)
        for ch in (9, 65535, 2):
            peer.open_channel(ch)
        peer.send(encode_method_frame(1, m.ChannelOpen()))
        close = peer.expect(m.ConnectionClose)
        assert (close.reply_code, close.class_id, close.method_id) == (530, 0, 0), close
        peer.close()
        # asking for more than offered (RabbitMQ logs these words and drops the socket)
        peer = RawPeer(server.amqp_port, channel_max=4)
        assert peer.refusal is not None
        assert (peer.refusal.reply_code, peer.refusal.reply_text) == (
            530,
            "NOT_ALLOWED - negotiated channel_max = 4 is higher than the maximum allowed "
            "value (3)",
        )
        assert peer.closed_by_server()
        peer.close()
        # a smaller channel_max is the client's to choose and binds it
        peer = RawPeer(server.amqp_port, channel_max=1)
        peer.open_channel(1)
        peer.send(encode_method_frame(2, m.ChannelOpen()))
        assert peer.expect(m.ConnectionClose).reply_code == 530
        peer.close()
        # pika takes the offer and the bystander on its own connection is unaffected
        chans = [bystander.channel() for _ in range(3)]
        assert all(c.is_open for c in chans)
        assert bystander._impl.params.channel_max == 3
        chans[0].queue_declare("", exclusive=True)


# -- message size: every protocol ------------------------------------------------------------


def test_max_message_size_applies_to_every_protocol(tmp_path: Path) -> None:
    """--max-message-size: AMQP closes the channel (406), STOMP sends an ERROR and closes,
    the management API's publish answers 400, each with RabbitMQ 3.10.8's words (checked
    with max_message_size = 65536 on all three). A message of exactly the limit goes."""
    limit = 1000
    text = f"message size {limit + 1} is larger than configured max size {limit}"
    with running_server(tmp_path, "--max-message-size", str(limit)) as server:
        with guest(server) as conn:
            ch = conn.channel()
            ch.queue_declare("sized", durable=True)  # as STOMP declares /queue/…
            ch.confirm_delivery()
            ch.basic_publish("", "sized", b"x" * limit)
            with pytest.raises(ChannelClosedByBroker) as err:
                ch.basic_publish("", "sized", b"x" * (limit + 1))
            assert (err.value.reply_code, err.value.reply_text) == (
                406, f"PRECONDITION_FAILED - {text}"
            )
        stomp_conn = stomp.Connection12([("127.0.0.1", server.stomp_port)])
        inbox = Inbox()
        stomp_conn.set_listener("inbox", inbox)
        stomp_conn.connect("guest", "guest", wait=True)
        stomp_conn.send("/queue/sized", "y" * limit, receipt="fits")
        assert inbox.receipt() == "fits"
        stomp_conn.send("/queue/sized", "y" * (limit + 1), receipt="too-big")
        err_frame = inbox.errors.get(timeout=5)
        assert err_frame.headers["message"] == "precondition_failed"
        assert err_frame.body == f"PRECONDITION_FAILED - {text}"
        assert inbox.disconnected.get(timeout=5)
        with httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest")) as api:
            publish = {"routing_key": "sized", "payload_encoding": "string", "properties": {}}
            fits = api.post("/exchanges/%2F/amq.default/publish",
                            json={**publish, "payload": "z" * limit})
            assert fits.json() == {"routed": True}
            big = api.post("/exchanges/%2F/amq.default/publish",
                           json={**publish, "payload": "z" * (limit + 1)})
            assert big.status_code == 400
            assert big.json() == {"error": "bad_request", "reason": text}
            # one message from each protocol, none of the refused ones
            assert api.get("/queues/%2F/sized").json()["messages"] == 3


# -- HTTP body size -------------------------------------------------------------------------


def test_http_body_size_limit(api: httpx.Client) -> None:
    big = {"vhosts": [{"name": "x" * 8000}]}
    reply = api.post("/definitions", json=big)
    assert reply.status_code == 413
    assert reply.json()["error"] == "payload_too_large"
    assert api.get("/overview").status_code == 200


# -- whole-broker connection limit ----------------------------------------------------------


def test_node_connection_limit(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data", "--max-connections", "2").start()
    try:
        with guest(server), guest(server):
            text = refusal(server, "guest", "guest", "%2F")
            assert text == (
                "530 NOT_ALLOWED - connection refused: node connection limit (2) is reached"
            )
            assert httpx.get(server.http_url + "/api/overview", auth=("guest", "guest")).is_success
            err = stomp_refusal(server, "guest", "guest")  # STOMP counts, and is refused too
            assert err.headers["message"] == "not_allowed"
            assert err.body == (
                "NOT_ALLOWED - connection refused: node connection limit (2) is reached"
            )
        with guest(server) as conn:  # a slot again
            assert conn.is_open
    finally:
        server.kill()


# -- failed logins --------------------------------------------------------------------------


def test_failed_logins_are_logged_with_the_peer(limited: RoostProcess) -> None:
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        amqp_as(limited, "nobody-amqp", "bad")
    limited.wait_for_log("AMQP login failed for user 'nobody-amqp' from 127.0.0.1:")
    conn = stomp.Connection12([("127.0.0.1", limited.stomp_port)])
    with pytest.raises(stomp.exception.ConnectFailedException):
        conn.connect("nobody-stomp", "bad", wait=True)
    limited.wait_for_log("STOMP login failed for user 'nobody-stomp' from 127.0.0.1:")
    reply = httpx.get(limited.http_url + "/api/overview", auth=("nobody-http", "bad"))
    assert reply.status_code == 401
    limited.wait_for_log("HTTP login failed for user 'nobody-http' from 127.0.0.1")


def test_failed_logins_are_throttled_per_peer(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data", "--max-failed-logins-per-minute", "3").start()
    try:
        for _ in range(3):
            with pytest.raises(pika.exceptions.ProbableAuthenticationError):
                amqp_as(server, "guest", "wrong")
        # past the limit even the right password is refused, and quickly
        started = time.monotonic()
        with pytest.raises(pika.exceptions.ProbableAuthenticationError):
            amqp_as(server, "guest", "guest")
        assert time.monotonic() - started < 2
        server.wait_for_log("too many failed logins from 127.0.0.1")
        reply = httpx.get(server.http_url + "/api/overview", auth=("guest", "guest"))
        assert reply.status_code == 401  # every protocol shares the count
    finally:
        server.kill()


def test_throttling_is_off_by_default(limited: RoostProcess) -> None:
    for _ in range(5):
        with pytest.raises(pika.exceptions.ProbableAuthenticationError):
            amqp_as(limited, "guest", "wrong")
    with guest(limited) as conn:
        assert conn.is_open




def test_deleting_a_user_drops_its_limits(api: httpx.Client) -> None:
    user = new_user(api, max_connections=3)
    assert api.delete(f"/users/{user}").status_code == 204
    assert all(entry["user"] != user for entry in api.get("/user-limits").json())
