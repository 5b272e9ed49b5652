from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pika
import pytest

from tests.support import RoostProcess, pump


@pytest.fixture
def conn(roost: RoostProcess) -> Iterator[pika.BlockingConnection]:
    connection = pika.BlockingConnection(pika.URLParameters(roost.url))
    yield connection
    if connection.is_open:
        connection.close()


def declare_stream(ch: Any, name: str, **arguments: Any) -> None:
    ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream", **arguments})


def publish(ch: Any, name: str, bodies: list[bytes], headers: dict | None = None) -> None:
    for body in bodies:
        ch.basic_publish("", name, body, pika.BasicProperties(headers=headers))


def read(
    conn: pika.BlockingConnection,
    ch: Any,
    name: str,
    count: int,
    arguments: dict[str, Any],
    *,
    ack: bool = True,
    timeout: float = 5.0,
) -> list[tuple[int, bytes]]:
    """Consume ``count`` messages (acking each), then cancel: (offset, body) pairs."""
    got: list[tuple[int, bytes]] = []

    def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
        got.append((props.headers["x-stream-offset"], body))
        if ack:
            c.basic_ack(method.delivery_tag)

    ch.basic_qos(prefetch_count=50)
    tag = ch.basic_consume(name, on_message, arguments=arguments)
    pump(conn, lambda: len(got) >= count, timeout)
    ch.basic_cancel(tag)
    return got


def query(ch: Any, name: str) -> dict[str, Any]:
    """The one-round-trip offset query: basic.get on a stream."""
    method, props, body = ch.basic_get(name, auto_ack=True)
    assert method is not None and body == b""
    return dict(props.headers)
