"""Helpers for the queue-feature tests: pika on the shared broker, a dead-letter queue
to wait on, and the management API for policies."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.support import RoostProcess

Got = tuple[Any, pika.BasicProperties, bytes]


@pytest.fixture
def conn(roost: RoostProcess) -> Iterator[pika.BlockingConnection]:
    connection = pika.BlockingConnection(pika.URLParameters(roost.url))
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


def drain(ch: BlockingChannel, queue: str) -> list[bytes]:
    """Every ready message's body (auto-ack)."""
    out = []
    while True:
        method, _props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)


def count(ch: BlockingChannel, queue: str) -> int:
    return int(ch.queue_declare(queue, passive=True).method.message_count)
