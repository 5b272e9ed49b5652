"""Replicated streams in the cluster tests: declared, filled and read back (through a
node with pika, or from a stopped node's files), and which members are in sync."""

from __future__ import annotations

import threading
import time
from typing import Any

import pika

from roost.codecs.stream_message import decode_stream_message
from roost.store.paths import stream_dir
from roost.store.stream_log import StreamLog
from roost.stream_protocol.frames import ResolveOffsetSpecResponse, StreamStatsResponse
from tests.cluster.nodes import queue_json
from tests.confirming import publish_confirmed
from tests.stream_protocol.clients import _raw_session
from tests.support import RoostProcess
from tests.unit.stream_logs import every_record

STREAM = {"x-queue-type": "stream"}


def publish(server: RoostProcess, queue: str, bodies: list[bytes]) -> None:
    """Publishes ``bodies`` in order, then one more with a confirm: confirms come in
    order, so once it is confirmed a majority holds every one of them."""
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        for body in bodies[:-1]:
            ch.basic_publish("", queue, body)
        ch.confirm_delivery()
        ch.basic_publish("", queue, bodies[-1])


def online(server: RoostProcess, queue: str) -> list[str]:
    return sorted(queue_json(server, queue)["online"])  # type: ignore[call-overload]


def replica(server: RoostProcess, queue: str) -> list[tuple[int, int, bytes]]:
    """(offset, timestamp, body) of every record in a stopped node's copy of ``queue``."""
    log = StreamLog(stream_dir(server.data_dir, "/", queue))
    try:
        return [
            (r.offset, r.timestamp, decode_stream_message(r.payload)[3])
            for r in every_record(log.reader(0))
        ]
    finally:
        log.close()


def read_all(
    server: RoostProcess, queue: str, at_least: int, limit: int = 0, **arguments: str
) -> dict[int, bytes]:
    """The stream's messages from its first offset: {offset: body}, at least
    ``at_least`` of them (till none came for a second), or the first ``limit``."""
    got: dict[int, bytes] = {}
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=200)
        deadline = time.monotonic() + 20
        for method, props, raw in ch.consume(
            queue, arguments={"x-stream-offset": "first", **arguments}, inactivity_timeout=1
        ):
            if method is None:
                if len(got) >= at_least or time.monotonic() > deadline:
                    break
                continue
            offset = (props.headers or {})["x-stream-offset"]
            assert offset not in got, f"offset {offset} delivered twice"
            got[offset] = raw
            ch.basic_ack(method.delivery_tag)
            if limit and len(got) >= limit:
                break
        ch.cancel()
    return got


def follower_reader(
    server: RoostProcess, queue: str, got: list[tuple[int, bytes]], stop: threading.Event
) -> None:
    """A consumer on a node that does not lead: reads through the leader from offset 0,
    through the failover, until ``stop`` and a second with nothing new."""
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)
        for method, props, raw in ch.consume(
            queue, arguments={"x-stream-offset": 0}, inactivity_timeout=1
        ):
            if method is None:
                if stop.is_set():
                    break
                continue
            got.append(((props.headers or {})["x-stream-offset"], raw))
            ch.basic_ack(method.delivery_tag)


def leader_of(server: RoostProcess, queue: str) -> str:
    return str(queue_json(server, queue)["leader"])


async def ask(node: RoostProcess, frame: Any) -> Any:
    """Send one StreamStats or ResolveOffsetSpec over a raw stream-protocol session and
    return its response."""
    raw = await _raw_session(node.stream_port)
    try:
        await raw.send(frame)
        while True:
            answer = await raw.next()
            if isinstance(answer, StreamStatsResponse | ResolveOffsetSpecResponse):
                return answer
    finally:
        await raw.close()


def publisher(
    server: RoostProcess, queue: str, confirmed: list[bytes], stop: threading.Event
) -> None:
    """Publishes persistent messages with confirms, one at a time; a nacked or unanswered
    one is given up (its body never counts as confirmed) and the next gets a new body."""

    def settled(n: int, ok: bool, _began: float) -> None:
        if ok:
            confirmed.append(message(n))

    publish_confirmed(server.url, queue, stop, message, settled, persistent=True)


def message(n: int) -> bytes:
    return f"m{n:06d}".encode()


def check(log: dict[int, bytes], confirmed: list[bytes]) -> None:
    """Offsets from 0 without a gap, no body twice, every confirmed body there."""
    assert sorted(log) == list(range(len(log))), "a gap in the offsets"
    bodies = list(log.values())
    assert len(set(bodies)) == len(bodies), "a message stored twice"
    missing = set(confirmed) - set(bodies)
    assert not missing, f"{len(missing)} confirmed messages lost: {sorted(missing)[:5]}"
