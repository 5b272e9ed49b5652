"""asyncio transport of the client: ``connect`` tries URIs in turn and returns a
``Connection`` (an ``asyncio.Protocol``); its ``channel()`` gives the AMQP API
(``roost.client.channel``).

The protocol class only moves bytes: ``data_received`` feeds the sans-IO
``ClientConnection`` and hands the frames to ``frames_received``, which a subclass may
override to take its hot path on raw frames (``roost perf`` counts deliveries and
confirms there without building a message object) and pass the rest to ``frame``.
Reconnecting is the caller's business: ``closed`` resolves when the connection ends,
``error`` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

from roost.amqp.errors import AMQPError
from roost.client.channel import Channel
from roost.client.connection import (
    BlockedChanged,
    ChannelEnded,
    ClientConnection,
    ConnectionEnded,
    ContentReceived,
    Event,
    MethodReceived,
    Opened,
    State,
)
from roost.client.errors import ClientError, ConnectError, ConnectionLost, ProtocolError
from roost.client.tls import client_context, server_hostname
from roost.client.uri import Endpoint, parse_uris

try:
    import uvloop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        """uvloop's where it is installed (Roost depends on it), else asyncio's."""
        return uvloop.new_event_loop()

except ImportError:  # pragma: no cover - uvloop is a dependency where it installs
    new_event_loop = asyncio.new_event_loop

# The transport buffers this much before pausing us: enough to keep the socket busy
# between loop iterations, little enough that latency is not all client-side queueing.
WRITE_HIGH_WATER = 256 * 1024
C = TypeVar("C", bound="Connection")


class Connection(asyncio.Protocol):
    """One AMQP connection. ``on_blocked(reason)`` hears connection.blocked (``None``
    when unblocked); ``drain()`` waits while blocked or while the socket is full."""

    def __init__(
        self, endpoint: Endpoint, *, name: str = "", product: str = "roost", heartbeat: int = 0
    ) -> None:
        self.endpoint = endpoint
        self.amqp = ClientConnection(endpoint, name=name, product=product, heartbeat=heartbeat)
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.error: BaseException | None = None  # why it ended, unless we closed it
        self.opened: asyncio.Future[None] = self.loop.create_future()
        self.closed: asyncio.Future[None] = self.loop.create_future()  # the socket is gone
        self.paused = False  # the socket's write buffer is above WRITE_HIGH_WATER
        self.channels: dict[int, Channel] = {}
        self.on_blocked: Callable[[str | None], None] | None = None
        self.last_received = self.loop.time()
        self._waiters: list[asyncio.Future[None]] = []
        self._beat: asyncio.TimerHandle | None = None

    @property
    def frame_max(self) -> int:
        return self.amqp.frame_max

    @property
    def server(self) -> str:
        return self.amqp.server

    @property
    def blocked(self) -> str | None:
        return self.amqp.blocked

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport, hence the cast
        self.transport = transport = cast(asyncio.Transport, transport)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.amqp.start()
        self.flush()

    def data_received(self, data: bytes) -> None:
        self.last_received = self.loop.time()
        reader = self.amqp.reader
        reader.feed(data)
        try:
            self.frames_received(reader.frames())
        except Exception as exc:  # malformed or out-of-order frames, or a failed login
            self.abort(exc)
            return
        if self.amqp.has_data:
            self.flush()

    def frames_received(self, frames: list[Any]) -> None:
        for frame in frames:
            self.frame(frame)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.wake()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._beat is not None:
            self._beat.cancel()
        if self.amqp.state is not State.CLOSED or self.error is not None:
            self._fail(exc or ConnectionLost("the connection was closed"))
        else:  # our close went through: whatever waits learns the connection is gone
            self._end_channels(ConnectionLost("the connection was closed by the client"))
        if not self.closed.done():
            self.closed.set_result(None)

    # -- frames and events ---------------------------------------------------------------

    def frame(self, frame: Any) -> None:
        event = self.amqp.receive(frame)
        if event is not None:
            self.event(event)

    def event(self, event: Event) -> None:
        kind = type(event)
        if kind is MethodReceived or kind is ContentReceived:
            ch = self.channels.get(event.channel)  # type: ignore[union-attr]
            if ch is not None:
                ch.received(event)  # type: ignore[arg-type]
        elif kind is ChannelEnded:
            assert isinstance(event, ChannelEnded)
            gone = self.channels.pop(event.channel, None)
            if gone is not None:
                gone.ended(event.error or ConnectionLost("the channel was closed"))
        elif kind is Opened:
            if not self.opened.done():
                self.opened.set_result(None)
            if self.amqp.heartbeat:
                self._beat = self.loop.call_later(self.amqp.heartbeat / 2, self._tick)
        elif kind is ConnectionEnded:
            assert isinstance(event, ConnectionEnded)
            if event.error is not None:
                self._fail(event.error)
            self.flush()  # our close-ok
            if self.transport is not None:
                self.transport.close()
        elif kind is BlockedChanged:
            assert isinstance(event, BlockedChanged)
            if event.reason is None:
                self.wake()
            if self.on_blocked is not None:
                self.on_blocked(event.reason)

    # -- helpers ---------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def flush(self) -> None:
        """Send what the protocol state queued (replies, requests, heartbeats)."""
        self.write(self.amqp.data_to_send())

    def wake(self) -> None:
        """Something a waiter may care about changed (the socket drained, unblocked, the
        connection ended): ``drain`` checks again. Subclasses may wake more."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def drain(self) -> None:
        """Return once publishing may go on: neither blocked by the broker nor held by a
        full socket buffer. Raises why the connection ended, if it did."""
        while self.error is None and (self.paused or self.amqp.blocked):
            fut = self.loop.create_future()
            self._waiters.append(fut)
            await fut
        if self.error is not None:
            raise self.error

    def abort(self, exc: BaseException) -> None:
        """Give up on the connection: close with the protocol error's code when there is
        one, then drop the socket."""
        self._fail(exc)
        if self.amqp.state is not State.CLOSED:  # a code of AMQP's to tell the broker
            if isinstance(exc, ProtocolError):
                self.amqp.close(exc.reply_code, exc.text[:255])
            elif isinstance(exc, AMQPError):  # the codec's: a malformed frame
                self.amqp.close(exc.reply_code, exc.reply_text[:255])
            self.flush()
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        if not self.opened.done():
            self.opened.set_exception(exc)
            self.opened.exception()  # retrieved: connect() re-raises it
        self._end_channels(exc)
        self.wake()

    def _end_channels(self, exc: BaseException) -> None:
        channels, self.channels = self.channels, {}
        for ch in channels.values():
            ch.ended(exc)

    def _tick(self) -> None:
        try:
            self.amqp.tick(self.loop.time(), self.last_received)
        except ConnectionLost as exc:
            self.abort(exc)
            return
        self.flush()
        self._beat = self.loop.call_later(self.amqp.heartbeat / 2, self._tick)

    # -- the API ---------------------------------------------------------------------------

    async def channel(self) -> Channel:
        """Open a channel (the lowest free number)."""
        if self.error is not None:
            raise self.error
        number = self.amqp.open_channel()
        ch = self.channels[number] = Channel(self, number)
        await ch.opening()
        return ch

    async def close(self, timeout: float = 2.0) -> None:
        """connection.close, close-ok within ``timeout``, then the socket is closed."""
        if self.transport is None or self.transport.is_closing():
            return
        if self.error is None and self.amqp.state is State.OPEN:
            self.amqp.close()
            self.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.closed), timeout)
        self.transport.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.closed), timeout)
        except TimeoutError:
            self.transport.abort()


Where = str | list[str] | Endpoint | list[Endpoint]


@overload
async def connect(uris: Where, *, name: str = "", product: str = "roost",
                  heartbeat: int = 0) -> Connection: ...


@overload
async def connect(uris: Where, factory: Callable[..., C], **options: Any) -> C: ...


async def connect(uris: Where, factory: Callable[..., Any] = Connection, **options: Any) -> Any:
    """Connect to the first URI that answers, trying them in the order given (shuffle
    them first to spread load). Each try is bounded by its ``connection_timeout``.
    ``options`` go to ``factory`` with the endpoint: for ``Connection``, ``name`` (shown
    by the broker), ``product`` and ``heartbeat`` (asked for unless the URI says; 0 by
    default: none). Raises ``ConnectError`` with each URI's failure."""
    endpoints = _endpoints(uris)
    errors: list[tuple[str, BaseException]] = []
    for ep in endpoints:
        try:
            return await _connect_one(ep, functools.partial(factory, ep, **options))
        except (OSError, TimeoutError, ClientError, ValueError) as exc:
            errors.append((str(ep), exc))
    raise ConnectError(errors)


def _endpoints(uris: Where) -> list[Endpoint]:
    if isinstance(uris, Endpoint):
        return [uris]
    if isinstance(uris, list) and uris and all(isinstance(u, Endpoint) for u in uris):
        return cast(list[Endpoint], uris)
    return parse_uris(cast("str | list[str]", uris))


async def _connect_one(ep: Endpoint, factory: Callable[[], C]) -> C:
    loop = asyncio.get_running_loop()
    tls = client_context(ep) if ep.tls else None
    conn: C | None = None
    try:
        async with asyncio.timeout(ep.connection_timeout):
            host, port = ep.address
            _, conn = await loop.create_connection(
                factory, host, port, ssl=tls,
                server_hostname=server_hostname(ep) if tls else None,
            )
            await conn.opened
    except BaseException:
        if conn is not None and conn.transport is not None:
            conn.transport.abort()
        raise
    return conn
