"""A minimal, fast AMQP 0-9-1 client connection on one channel, built on the codec.

It does only what a load generator needs: PLAIN login, one channel, synchronous
calls (declare, qos, consume, confirm.select), and hooks so that producers and
consumers can run their hot paths on raw frames without any per-message awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, cast

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.perf.options import Endpoint

CHANNEL = 1
CLIENT_FRAME_MAX = 131072
# The transport buffers this much before pausing us: large enough to keep the socket
# busy between loop iterations, small enough that latency is not all client queueing.
WRITE_HIGH_WATER = 256 * 1024

try:
    import uvloop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        return uvloop.new_event_loop()

except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
    new_event_loop = asyncio.new_event_loop


class ClosedByBroker(Exception):
    """The broker closed the channel or the connection; carries its reply."""

    def __init__(self, scope: str, reply_code: int, reply_text: str) -> None:
        super().__init__(f"{scope} closed by broker: {reply_code} {reply_text}")
        self.scope = scope
        self.reply_code = reply_code
        self.reply_text = reply_text


class Connection(asyncio.Protocol):
    """One AMQP connection with channel 1 open. Subclasses hook ``frames_received``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reader = codec.FrameReader(frame_max=CLIENT_FRAME_MAX, expect_protocol_header=False)
        self.frame_max = CLIENT_FRAME_MAX
        self.server = ""
        self.error: BaseException | None = None  # why the connection ended, if not by us
        self.paused = False
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._expect: frozenset[int] = frozenset()
        self._reply: asyncio.Future[Any] | None = None
        self._wake: asyncio.Future[None] | None = None
        self.on_method: Callable[[Any], None] | None = None

    # -- asyncio.Protocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, hence the cast.
        self.transport = transport = cast(asyncio.Transport, transport)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        # Arm the wait for connection.start before the header goes out: the reply can
        # arrive before the coroutine that called create_connection resumes.
        self._arm((m.ConnectionStart,))
        transport.write(codec.PROTOCOL_HEADER)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            self.frames_received(self.reader.frames())
        except Exception as exc:  # a malformed frame from the broker ends the connection
            self._fail(exc)
            if self.transport is not None:
                self.transport.abort()

    def frames_received(self, frames: list[Any]) -> None:
        for frame in frames:
            self.control(frame)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("connection closed"))
        if not self.lost.done():
            self.lost.set_result(None)

    # -- frames outside the hot path --------------------------------------------------
    def control(self, frame: Any) -> None:
        if isinstance(frame, codec.HeartbeatFrame):
            self.write(codec.encode_heartbeat())
            return
        if not isinstance(frame, codec.MethodFrame):
            return  # content of a delivery nobody asked for
        method = frame.method
        index = method.INDEX
        if index in self._expect and self._reply is not None and not self._reply.done():
            self._expect = frozenset()
            self._reply.set_result(method)
        elif isinstance(method, m.ConnectionClose):
            self.write(codec.encode_method_frame(0, m.ConnectionCloseOk()))
            self._fail(ClosedByBroker("connection", method.reply_code, method.reply_text))
        elif isinstance(method, m.ChannelClose):
            self.write(codec.encode_method_frame(CHANNEL, m.ChannelCloseOk()))
            self._fail(ClosedByBroker("channel", method.reply_code, method.reply_text))
        elif self.on_method is not None:
            self.on_method(method)  # the rest (basic.cancel…) is the role's business

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(exc)
        self.wake()

    # -- helpers ----------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def wake(self) -> None:
        """Resolve whoever sleeps in ``wait`` (a confirm arrived, the socket drained…)."""
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Sleep until ``wake`` or ``timeout``; the caller re-checks its own condition."""
        self._wake = asyncio.get_running_loop().create_future()
        await asyncio.wait([self._wake], timeout=timeout)

    def _arm(self, replies: tuple[type[Any], ...]) -> asyncio.Future[Any]:
        """Expect one of ``replies`` next; ``control`` resolves the returned future."""
        if self.error is not None:
            raise self.error
        self._expect = frozenset(r.INDEX for r in replies)
        self._reply = asyncio.get_running_loop().create_future()
        return self._reply

    async def call(
        self, method: Any, *replies: type[Any], channel: int = CHANNEL, timeout: float = 30.0
    ) -> Any:
        """Send one method and wait up to ``timeout`` seconds for one of ``replies`` (a
        broker close raises)."""
        reply = self._arm(replies)
        self.write(codec.encode_method_frame(channel, method))
        return await asyncio.wait_for(reply, timeout)

    # -- life cycle -------------------------------------------------------------------
    async def handshake(self, ep: Endpoint) -> None:
        assert self._reply is not None  # armed in connection_made
        start = await asyncio.wait_for(self._reply, 30.0)
        props = start.server_properties or {}
        self.server = " ".join(
            _text(props.get(k)) for k in ("product", "version") if props.get(k)
        )
        if b"PLAIN" not in _raw(start.mechanisms).split():
            raise ConnectionError(f"broker offers no PLAIN login: {start.mechanisms!r}")
        tune = await self.call(
            m.ConnectionStartOk(
                client_properties={
                    "product": "roost-perf",
                    "capabilities": {
                        "publisher_confirms": True,
                        "basic.nack": True,
                        # a wrong password then gets a 403 close, not a bare reset
                        "authentication_failure_close": True,
                    },
                },
                mechanism="PLAIN",
                response=f"\0{ep.user}\0{ep.password}".encode(),
                locale="en_US",
            ),
            m.ConnectionTune,
            channel=0,
        )
        self.frame_max = min(tune.frame_max or CLIENT_FRAME_MAX, CLIENT_FRAME_MAX)
        # heartbeat 0: a benchmark must not be disconnected while it is busy; the
        # broker may still send some, and ``control`` answers them.
        self.write(
            codec.encode_method_frame(
                0, m.ConnectionTuneOk(channel_max=tune.channel_max, frame_max=self.frame_max,
                                      heartbeat=0)
            )
        )
        await self.call(m.ConnectionOpen(virtual_host=ep.vhost), m.ConnectionOpenOk, channel=0)
        await self.open_channel()

    async def open_channel(self) -> None:
        if isinstance(self.error, ClosedByBroker) and self.error.scope == "channel":
            self.error = None  # the connection survives a channel error: start afresh
        await self.call(m.ChannelOpen(), m.ChannelOpenOk)

    async def close(self, timeout: float = 2.0) -> None:
        """connection.close and wait for close-ok (bounded), then drop the socket."""
        if self.transport is None or self.transport.is_closing():
            return
        if self.error is None:
            with contextlib.suppress(TimeoutError, ClosedByBroker, ConnectionError):
                await asyncio.wait_for(
                    self.call(m.ConnectionClose(reply_code=200, reply_text="bye", class_id=0,
                                                method_id=0),
                              m.ConnectionCloseOk, channel=0),
                    timeout,
                )
        self.transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.lost), timeout)
        except TimeoutError:
            self.transport.abort()


async def connect(ep: Endpoint, factory: Callable[[], Connection] = Connection) -> Connection:
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(factory, ep.host, ep.port)
    try:
        await asyncio.wait_for(conn.handshake(ep), 30.0)
    except BaseException:
        if conn.transport is not None:
            conn.transport.abort()
        raise
    return conn


def publish_template(
    *,
    exchange: str,
    routing_key: str,
    size: int,
    persistent: bool,
    frame_max: int,
    priority: int | None = None,
) -> tuple[bytes, bytes]:
    """The frames of one basic.publish split around the body's first 8 bytes.

    A message is ``prefix + timestamp + suffix``: everything is encoded once per run
    and only the timestamp changes. With a body under 8 bytes the prefix is the whole
    message and the suffix is empty (no timestamp, no latency).
    """
    props = codec.encode_properties(
        m.BasicProperties(delivery_mode=2 if persistent else 1, priority=priority)
    )
    body = bytes(size)
    whole = codec.encode_basic_publish(
        CHANNEL, exchange, routing_key, False, False, props, body, frame_max
    )
    if size < 8:
        return whole, b""
    method_len = len(
        codec.encode_method_frame(
            CHANNEL, m.BasicPublish(exchange=exchange, routing_key=routing_key)
        )
    )
    # header frame = 7 (frame header) + 12 (class, weight, body size) + props + 1 (end)
    body_at = method_len + 7 + 12 + len(props) + 1 + 7
    if whole[body_at - 7] != 3:  # the first body frame's type octet
        raise AssertionError("unexpected basic.publish layout from the codec")
    return whole[:body_at], whole[body_at + 8 :]


def ack_template(multiple: bool) -> tuple[bytes, bytes]:
    """basic.ack on our channel split around its 8-byte delivery tag."""
    marker = 0x0102030405060708
    frame = codec.encode_method_frame(CHANNEL, m.BasicAck(delivery_tag=marker, multiple=multiple))
    at = frame.index(marker.to_bytes(8, "big"))
    return frame[:at], frame[at + 8 :]


def _raw(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
