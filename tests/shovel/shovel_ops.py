"""Shovels over the management API, and the queues they move between, read and filled with pika."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pika
import pika.exceptions

from tests.support import RoostProcess


def api(server: RoostProcess) -> httpx.Client:
    return httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest"), timeout=10)


def put_shovel(server: RoostProcess, name: str, value: dict[str, Any]) -> httpx.Response:
    with api(server) as c:
        return c.put(f"/parameters/shovel/%2F/{name}", json={"value": value})


def shovels(server: RoostProcess) -> dict[str, dict[str, Any]]:
    with api(server) as c:
        rows = c.get("/shovels/%2F").json()
    return {r["name"]: r for r in rows}


def state(server: RoostProcess, name: str) -> str | None:
    row = shovels(server).get(name)
    return None if row is None else row["state"]


def publish(
    url: str,
    queue: str,
    bodies: list[bytes],
    *,
    key: str | None = None,
    exchange: str = "",
    declare: bool = True,
    confirm: bool = True,
) -> None:
    """Publish persistent messages (with confirms unless told not: pika then waits for
    each); the queue declared durable unless told not."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        if confirm:
            ch.confirm_delivery()
        if declare:
            ch.queue_declare(queue, durable=True)
        props = pika.BasicProperties(delivery_mode=2, headers={"n": 1})
        for body in bodies:
            ch.basic_publish(exchange, key if key is not None else queue, body, props)


def take(url: str, queue: str) -> list[tuple[pika.BasicProperties, bytes]]:
    """Every message in ``queue``, acked (gone from it)."""
    got = []
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        ch = conn.channel()
        while True:
            method, props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                return got
            got.append((props, body))


def depth(url: str, queue: str) -> int:
    """Messages ready in ``queue``; 0 while it does not exist."""
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        try:
            return conn.channel().queue_declare(queue, passive=True).method.message_count
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code != 404:
                raise
            return 0


def unique(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:6]}"
