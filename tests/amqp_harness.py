"""The AMQP adapter without sockets: ``AMQPServerProtocol`` on a fake transport, over a
broker built in process (the in-memory store twin), driven by frames a test encodes with
the codec and read back as frames. What goes on the wire, when reading pauses and
resumes, and what the connection releases are all visible without a network.

    async def test_x() -> None:                 # run with asyncio.run (no plugin)
        amqp = AMQPHarness()
        amqp.open()                             # header, start-ok, tune-ok, open: ready
        amqp.send(1, m.ChannelOpen())
        assert amqp.expect(m.ChannelOpenOk)
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    BodyFrame,
    FrameReader,
    HeaderFrame,
    MethodFrame,
    decode_properties,
    encode_content,
    encode_method_frame,
    encode_properties,
)
from roost.amqp.protocol import AMQPLimits, AMQPServerProtocol
from roost.core.broker import Broker
from roost.core.message import Properties
from tests.brokers import memory_broker

M = TypeVar("M", bound=m.Method)


class FakeTransport(asyncio.Transport):
    """Records what the protocol writes and whether it wants reading paused."""

    def __init__(self, peer: tuple[str, int] = ("127.0.0.1", 40000)) -> None:
        super().__init__()
        self.peer = peer
        self.written = bytearray()
        self.writes = 0  # transport.write calls: write batching is visible
        self.reading = True
        self.closed = False
        self.aborted = False
        self.protocol: asyncio.Protocol | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "ssl_object": None, "socket": None}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data
        self.writes += 1

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.protocol is not None:
                asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.aborted = True
        self.close()

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def can_write_eof(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


class AMQPHarness:
    """One server-side AMQP connection on a fake transport. Must be made inside a
    running event loop (the protocol's timers use it)."""

    def __init__(
        self,
        broker: Broker | None = None,
        limits: AMQPLimits | None = None,
        peer: tuple[str, int] = ("127.0.0.1", 40000),
    ) -> None:
        self.broker = broker if broker is not None else memory_broker()
        self.registry: set[Any] = set()
        self.protocol = AMQPServerProtocol(self.broker, limits or AMQPLimits(), self.registry)
        self.transport = FakeTransport(peer)
        self.transport.protocol = self.protocol
        self.protocol.connection_made(self.transport)
        self._reader = FrameReader(frame_max=0, expect_protocol_header=False)
        self._read_upto = 0
        self.frames: list[Any] = []  # every frame the server sent, in order

    # -- input ----------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes as one read from the socket (``data_received``)."""
        self.protocol.data_received(data)

    def send(self, channel: int, method: m.Method) -> None:
        self.feed(encode_method_frame(channel, method))

    def publish_frames(
        self,
        channel: int,
        body: bytes,
        *,
        exchange: str = "",
        routing_key: str = "",
        properties: Properties | None = None,
    ) -> bytes:
        """basic.publish, its header and body as bytes (to feed alone or batched)."""
        method = encode_method_frame(
            channel, m.BasicPublish(exchange=exchange, routing_key=routing_key)
        )
        props = encode_properties(properties or Properties())
        return method + encode_content(channel, 60, props, body, 131072)

    def open(self, vhost: str = "/", user: str = "guest", password: str = "guest") -> None:
        """The handshake, to connection.open-ok."""
        self.feed(PROTOCOL_HEADER)
        self.expect(m.ConnectionStart)
        response = b"\x00" + user.encode() + b"\x00" + password.encode()
        capabilities = {"publisher_confirms": True, "consumer_cancel_notify": True,
                        "connection.blocked": True}  # fmt: skip
        self.send(0, m.ConnectionStartOk(client_properties={"capabilities": capabilities},
                                         mechanism="PLAIN", response=response))  # fmt: skip
        tune = self.expect(m.ConnectionTune)
        self.send(0, m.ConnectionTuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max,
                                        heartbeat=0))  # fmt: skip
        self.send(0, m.ConnectionOpen(virtual_host=vhost))
        self.expect(m.ConnectionOpenOk)

    # -- output ---------------------------------------------------------------------------

    def received(self) -> list[Any]:
        """Frames written since the last call (decoded with the codec)."""
        written = self.transport.written
        if len(written) > self._read_upto:
            self._reader.feed(bytes(written[self._read_upto :]))
            self._read_upto = len(written)
        out = []
        while (frame := self._reader.next_frame()) is not NEED_DATA:
            out.append(frame)
        self.frames.extend(out)
        return out

    def methods(self) -> list[m.Method]:
        return [f.method for f in self.received() if isinstance(f, MethodFrame)]

    def expect(self, kind: type[M]) -> M:
        """The next method the server sent, which must be a ``kind``."""
        for frame in self.received():
            if isinstance(frame, MethodFrame):
                assert isinstance(frame.method, kind), f"{frame.method!r} is not a {kind}"
                return frame.method
        raise AssertionError(f"the server sent no {kind.__name__}")

    def deliveries(self) -> list[tuple[m.Method, Any, bytes]]:
        """(basic.deliver or get-ok, properties, body) for each delivery since the last call."""
        out: list[tuple[m.Method, Any, bytes]] = []
        method: m.Method | None = None
        props: Any = None
        body, size = b"", 0
        for frame in self.received():
            if isinstance(frame, MethodFrame):
                method, body = frame.method, b""
            elif isinstance(frame, HeaderFrame):
                props, size = decode_properties(frame.properties), frame.body_size
            elif isinstance(frame, BodyFrame):
                body += frame.payload
            else:
                continue
            complete = method is not None and props is not None and len(body) == size
            if complete and method is not None and not isinstance(frame, MethodFrame):
                out.append((method, props, body))
                method, props = None, None
        return out

    async def settle(self) -> None:
        """Let callbacks the loop was asked to run (deliveries from other connections,
        group commits) run."""
        for _ in range(3):
            await asyncio.sleep(0)
