"""Fixtures for the routing-extension tests: pika on the shared broker, a management API
client, and helpers that wait for deliveries instead of sleeping."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.integration.conftest import pika_params, pump, settle
from tests.support import RoostProcess

__all__ = ["Returns", "drain", "get_body", "pika_params", "pump", "settle"]


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
