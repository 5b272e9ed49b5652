"""Helpers for the queue-feature tests: pika on the shared broker, a management API
client, a dead-letter queue to wait on, and helpers that wait for deliveries instead of
sleeping."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.integration.conftest import pika_params
from tests.stomp.conftest import connect
from tests.support import RoostProcess, pump, settle

# ``connect`` is the STOMP tests' fixture (stomp.py connections with an Inbox), for the
# features' STOMP tests
__all__ = [
    "Returns",
    "connect",
    "count",
    "drain",
    "get_body",
    "pika_params",
    "pump",
    "settle",
    "wait_get",
]

Got = tuple[Any, pika.BasicProperties, bytes]


@pytest.fixture
def conn(roost: RoostProcess) -> Iterator[pika.BlockingConnection]:
    connection = pika.BlockingConnection(pika_params(roost))
    yield connection
    if connection.is_open:
        connection.close()


@pytest.fixture
def ch(conn: pika.BlockingConnection) -> BlockingChannel:
    return conn.channel()


@pytest.fixture
def http(roost: RoostProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=roost.http_url, auth=("guest", "guest"), timeout=10.0) as c:
        yield c


def dead_letter_queue(ch: BlockingChannel, name: str) -> str:
    """A fanout exchange ``name`` bound to a queue of the same name; returns the name."""
    ch.exchange_declare(name, "fanout")
    ch.queue_declare(name)
    ch.queue_bind(name, name)
    return name


def wait_get(ch: BlockingChannel, queue: str, timeout: float = 5.0) -> Got:
    """basic.get (auto-ack) until a message arrives: dead-lettering happens on the
    broker's own timers, and there is no event to wait on from a polling client."""
    deadline = time.monotonic() + timeout
    while True:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is not None:
            return method, props, body
        assert time.monotonic() < deadline, f"nothing arrived in {queue!r}"
        ch.connection.process_data_events(time_limit=0.02)


def count(ch: BlockingChannel, queue: str) -> int:
    return int(ch.queue_declare(queue, passive=True).method.message_count)


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A prefix unique to the test for its exchanges and queues."""
    return "f." + request.node.name.replace("[", ".").replace("]", "")


class Returns:
    """basic.return frames received on a channel: (reply code, exchange, key, body)."""

    def __init__(self, channel: BlockingChannel) -> None:
        self.items: list[tuple[int, str, str, bytes]] = []
        channel.add_on_return_callback(self._on_return)

    def _on_return(self, _ch: Any, method: Any, _props: Any, body: bytes) -> None:
        self.items.append((method.reply_code, method.exchange, method.routing_key, body))


def get_body(channel: BlockingChannel, queue: str) -> bytes | None:
    _method, _props, body = channel.basic_get(queue, auto_ack=True)
    return body


def drain(channel: BlockingChannel, queue: str) -> list[bytes]:
    """Every message now in the queue, acknowledged."""
    out: list[bytes] = []
    while (body := get_body(channel, queue)) is not None:
        out.append(body)
    return out
