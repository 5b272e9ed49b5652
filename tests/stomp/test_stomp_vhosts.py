"""CONNECT's ``host`` header selects the vhost; a host that names no vhost means "/"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pytest
import stomp

from tests.integration.conftest import pika_params
from tests.stomp.conftest import Inbox
from tests.support import RoostProcess

VHOST = "stomp-host-test"


@pytest.fixture
def vhost(roost: RoostProcess) -> Iterator[str]:
    with httpx.Client(base_url=roost.http_url, auth=("guest", "guest"), timeout=5) as http:
        http.put(f"/api/vhosts/{VHOST}", json={}).raise_for_status()
        everything = {"configure": ".*", "write": ".*", "read": ".*"}
        http.put(f"/api/permissions/{VHOST}/guest", json=everything).raise_for_status()
        yield VHOST
        http.delete(f"/api/vhosts/{VHOST}").raise_for_status()


def stomp_on(roost: RoostProcess, host: str) -> tuple[Any, Inbox]:
    """stomp.py puts its ``vhost`` in the CONNECT frame's ``host`` header."""
    conn = stomp.Connection12([("127.0.0.1", roost.stomp_port)], vhost=host)
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    conn.connect("guest", "guest", wait=True)
    return conn, inbox


def put(roost: RoostProcess, vhost: str, queue: str, body: bytes) -> None:
    with pika.BlockingConnection(pika_params(roost, virtual_host=vhost)) as amqp:
        ch = amqp.channel()
        ch.queue_declare(queue, durable=True)
        ch.basic_publish("", queue, body)


def test_host_header_selects_the_vhost(roost: RoostProcess, vhost: str, qname: str) -> None:
    put(roost, "/", qname, b"in /")
    put(roost, vhost, qname, b"in the other vhost")
    conn, inbox = stomp_on(roost, vhost)
    try:
        conn.subscribe(f"/amq/queue/{qname}", id="s", ack="auto")
        assert inbox.message().body == "in the other vhost"
        inbox.no_message()
        conn.send(f"/queue/{qname}.sent", "sent from STOMP", receipt="r")
        inbox.receipt()
    finally:
        conn.disconnect()
    with pika.BlockingConnection(pika_params(roost, virtual_host=vhost)) as amqp:
        _method, _props, body = amqp.channel().basic_get(f"{qname}.sent", auto_ack=True)
        assert body == b"sent from STOMP"
    with pika.BlockingConnection(pika_params(roost)) as amqp:
        ch = amqp.channel()
        assert ch.queue_declare(qname, passive=True).method.message_count == 1  # untouched
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):
            ch.queue_declare(f"{qname}.sent", passive=True)


def test_host_that_is_no_vhost_falls_back_to_the_default_vhost(
    roost: RoostProcess, qname: str
) -> None:
    """stomp.py sends the server's host name by default; RabbitMQ refuses that, Roost
    takes it as "/" (docs/stomp.md)."""
    conn, inbox = stomp_on(roost, "not-a-vhost")
    try:
        conn.send(f"/queue/{qname}", "landed in /", receipt="r")
        inbox.receipt()
    finally:
        conn.disconnect()
    with pika.BlockingConnection(pika_params(roost)) as amqp:
        _method, _props, body = amqp.channel().basic_get(qname, auto_ack=True)
        assert body == b"landed in /"
