"""RabbitMQ's stream error counters (rabbitmq_global_stream_error_<name>_total) count the
error answers the stream protocol gives: on /metrics of a running Roost after real
clients met those errors, and on the session with an in-memory broker."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from rstream import Producer
from rstream.exceptions import StreamAlreadyExists, StreamDoesNotExist

from roost.stream_protocol import constants as c
from roost.stream_protocol.codec import encode
from roost.stream_protocol.frames import (
    Create,
    OffsetSpec,
    PeerProperties,
    Publish,
    PublishedMessage,
    SaslAuthenticate,
    SaslHandshake,
    Subscribe,
)
from tests.http.exposition import series
from tests.stream_protocol.sessions import opened
from tests.support import RoostProcess

ERROR = 'rabbitmq_global_stream_error_{}_total{{protocol="stream"}}'


def test_the_session_counts_each_error_answer() -> None:
    session, _transport, clock, _ = opened()
    session.data_received(
        encode(Create(6, "s"))  # exists already
        + encode(Subscribe(7, 1, "missing", OffsetSpec(c.OFFSET_FIRST), 1))
        + encode(Publish(9, [PublishedMessage(1, b"a"), PublishedMessage(2, b"b")]))
    )
    clock.advance(0)
    activity = session.port.management.activity  # type: ignore[attr-defined]
    [totals] = [t for t in activity.protocol_totals() if t.protocol == "stream"]
    assert dict(totals.errors) == {
        "stream_already_exists": 1,
        "stream_does_not_exist": 1,
        "publisher_does_not_exist": 2,  # one per publishing id
    }


def scrape(server: RoostProcess) -> dict[str, float]:
    r = httpx.get(f"http://127.0.0.1:{server.prometheus_port}/metrics", timeout=10)
    return series(r.text)


def test_prometheus_shows_the_stream_errors_clients_met(roost: RoostProcess, qname: str) -> None:
    before = scrape(roost)

    async def main() -> None:
        port = roost.stream_port
        async with Producer("127.0.0.1", port, username="guest", password="guest") as producer:
            await producer.create_stream(qname)
            with pytest.raises(StreamAlreadyExists):
                await producer.create_stream(qname)
            await producer.delete_stream(qname)
            with pytest.raises(StreamDoesNotExist):
                await producer.delete_stream(qname)

    asyncio.run(main())
    with socket.create_connection(("127.0.0.1", roost.stream_port), timeout=5) as sock:
        sock.sendall(
            encode(PeerProperties(1, {}))
            + encode(SaslHandshake(2))
            + encode(SaslAuthenticate(3, "PLAIN", b"\x00guest\x00wrong"))
        )
        while sock.recv(65536):
            pass
    after = scrape(roost)

    def grew(name: str) -> float:
        return after[ERROR.format(name)] - before[ERROR.format(name)]

    assert grew("stream_does_not_exist") == 1
    assert grew("stream_already_exists") == 1
    assert grew("authentication_failure") == 1
    assert grew("access_refused") == 0
