"""Sans-IO stream-protocol sessions under test: the transport they write to, an open session on
a stream, and what it delivered."""

from __future__ import annotations

import time
from typing import Any

import stomp

from roost.stream_protocol.codec import FrameReader, encode
from roost.stream_protocol.frames import (
    Create,
    Deliver,
    OffsetSpec,
    Open,
    PeerProperties,
    SaslAuthenticate,
    SaslHandshake,
    Subscribe,
    Tune,
)
from roost.stream_protocol.session import StreamSession, StreamSettings
from roost.stream_protocol.states import OPEN
from tests.brokers import memory_broker
from tests.fake_clock import FakeClock
from tests.support import RoostProcess


class FakeTransport:
    peer = "127.0.0.1:5000"
    tls = False
    cert_user: str | None = None

    def __init__(self) -> None:
        self.data = b""
        self.closed = False
        self.reading = True
        self.reader = FrameReader(role="client")

    def write(self, data: bytes) -> None:
        self.reader.feed(data)

    def frames(self) -> list[Any]:
        return self.reader.frames()

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def opened(
    frame_max: int = 1_048_576,
) -> tuple[StreamSession, FakeTransport, FakeClock, list[Any]]:
    """An open session on a new stream "s"; the list collects every core publish."""
    port = memory_broker()
    publishes: list[Any] = []
    real = port.publish

    def counted(*args: Any, **kwargs: Any) -> Any:
        publishes.append(args[2])
        return real(*args, **kwargs)

    port.publish = counted  # type: ignore[method-assign]
    transport, clock = FakeTransport(), FakeClock()
    session = StreamSession(port, StreamSettings(), transport, clock)
    for frame in (
        PeerProperties(1, {}),
        SaslHandshake(2),
        SaslAuthenticate(3, "PLAIN", b"\x00guest\x00guest"),
        Tune(frame_max, 0, response=True),
        Open(4, "/"),
        Create(5, "s"),
    ):
        session.data_received(encode(frame))
    clock.advance(0)
    assert session.state == OPEN
    transport.frames()
    return session, transport, clock, publishes


def _stomp_read(roost: RoostProcess, stream: str, count: int) -> list[str]:
    frames: list[Any] = []

    class Collect(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            frames.append(frame)

    conn = stomp.Connection12([("127.0.0.1", roost.stomp_port)], heartbeats=(0, 0))
    conn.set_listener("collect", Collect())
    conn.connect("guest", "guest", wait=True)
    try:
        conn.subscribe(
            f"/amq/queue/{stream}",
            id="s",
            ack="client-individual",
            headers={"prefetch-count": "10", "x-stream-offset": "first"},
        )
        deadline = time.monotonic() + 10
        while len(frames) < count and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        conn.disconnect()
    return [frame.body for frame in frames]


_SESSIONS: list[StreamSession] = []


def session_on(
    port: Any, frame_max: int, create: bool
) -> tuple[StreamSession, FakeTransport, FakeClock]:
    transport, clock = FakeTransport(), FakeClock()
    session = StreamSession(port, StreamSettings(), transport, clock)
    _SESSIONS.append(session)
    frames: list[Any] = [
        PeerProperties(1, {}),
        SaslHandshake(2),
        SaslAuthenticate(3, "PLAIN", b"\x00guest\x00guest"),
        Tune(frame_max, 0, response=True),
        Open(4, "/"),
    ]
    if create:
        frames.append(Create(5, "s"))
    for frame in frames:
        session.data_received(encode(frame))
    clock.advance(0)
    assert session.state == OPEN
    transport.frames()
    return session, transport, clock


def delivered(
    session: StreamSession,
    transport: FakeTransport,
    clock: FakeClock,
    spec: OffsetSpec,
    **subscribe: Any,
) -> list[Deliver]:
    session.data_received(encode(Subscribe(9, 1, "s", spec, 100, **subscribe)))
    clock.advance(0)
    return [f for f in transport.frames() if isinstance(f, Deliver)]
