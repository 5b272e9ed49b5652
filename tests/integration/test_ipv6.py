"""--bind takes several addresses and defaults to both loopbacks, so a client that
resolves localhost to ::1 connects (issue 28). Each listener follows it: AMQP with pika,
STOMP with stomp.py, Web-STOMP with websocket-client, the management API with httpx
(the TLS listeners: tests/security/test_tls.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pika
import stomp
import websocket

from tests.stomp.conftest import Inbox
from tests.support import RoostProcess, running_server


def test_every_listener_answers_on_ipv6_loopback_by_default(roost: RoostProcess) -> None:
    """The default --bind is 127.0.0.1 and ::1; guest may log in from either."""
    for where in ("127.0.0.1", "[::1]"):
        assert f"AMQP 0-9-1 listening on {where}:{roost.amqp_port}" in roost.log
        assert f"STOMP listening on {where}:{roost.stomp_port}" in roost.log
        assert f"HTTP management listening on {where}:{roost.http_port}" in roost.log
        assert f"STOMP over WebSocket listening on {where}:{roost.ws_port} (path /ws)" in roost.log
    params = pika.URLParameters(f"amqp://guest:guest@[::1]:{roost.amqp_port}/%2F")
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", q, b"over ::1")
        assert ch.basic_get(q, auto_ack=True)[2] == b"over ::1"

    inbox = Inbox()
    client = stomp.Connection12([("::1", roost.stomp_port)])
    client.set_listener("inbox", inbox)
    client.connect("guest", "guest", wait=True)
    client.subscribe("/queue/ipv6.stomp", id="s")
    client.send("/queue/ipv6.stomp", "hello over ::1", receipt="r")
    assert inbox.message().body == "hello over ::1"
    client.disconnect()

    ws = websocket.create_connection(
        f"ws://[::1]:{roost.ws_port}/ws", subprotocols=["v12.stomp"], timeout=5
    )
    ws.send("CONNECT\naccept-version:1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\x00")
    assert ws.recv().startswith("CONNECTED")
    ws.close()

    overview = httpx.get(
        f"http://[::1]:{roost.http_port}/api/overview", auth=("guest", "guest"), timeout=5
    ).json()
    listened = {(li["protocol"], li["ip_address"]) for li in overview["listeners"]}
    assert {("amqp", "127.0.0.1"), ("amqp", "::1"), ("stomp", "::1")} <= listened


def test_bind_takes_several_addresses_and_skips_one_the_machine_lacks(tmp_path: Path) -> None:
    """Comma-separated or repeated; an address that is not on the machine (192.0.2.1,
    TEST-NET) is logged and skipped while the others listen."""
    with running_server(
        tmp_path, "--bind", "::1,192.0.2.1", "--bind", "127.0.0.1", "--bind", "::1"
    ) as server:
        log = server.log
        assert f"AMQP 0-9-1 listening on [::1]:{server.amqp_port}" in log
        assert f"AMQP 0-9-1 listening on 127.0.0.1:{server.amqp_port}" in log
        assert "AMQP 0-9-1: not listening on 192.0.2.1" in log
        assert log.count(f"listening on [::1]:{server.amqp_port}") == 1  # once, not twice
        with socket.create_connection(("::1", server.amqp_port), timeout=5):
            pass


def test_ipv4_only_bind_leaves_ipv6_closed(tmp_path: Path) -> None:
    with running_server(tmp_path, "--bind", "127.0.0.1") as server:
        try:
            socket.create_connection(("::1", server.amqp_port), timeout=2).close()
        except ConnectionRefusedError:
            pass
        else:
            raise AssertionError("::1 answered though --bind was 127.0.0.1 only")
