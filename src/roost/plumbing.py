"""The asyncio side of a sans-IO protocol session over TCP (and TLS), shared by the
STOMP, MQTT and stream-protocol adapters: the session parses, decides and writes
synchronously; this owns the socket.

- Writes are batched: what a session writes while it handles one read goes out in one
  ``transport.write`` when the read is done; what it writes outside a read (a delivery,
  a timer) goes out in one write at the next turn of the loop. A backlog of ``FLUSH_AT``
  bytes goes out at once, so a big burst is not held in memory for a whole turn.
- ``pause_reading`` / ``resume_reading`` (asked for by the session's ``ReadGate``,
  roost/backpressure.py) reach the socket once each, and never a closing one.
- ``pause_writing`` / ``resume_writing`` (the socket's buffer is full / drained) become
  ``writable_changed``, which each adapter forwards to its core session(s).
- The loop is the session's clock; a connection lost with an error becomes the close
  reason the session reports, unless it already has one.

An adapter subclasses ``TcpPlumbing`` and says how its session is made (``start``) and
where writability goes (``writable_changed``). ``WebSocketPlumbing`` is the same for a
session over an aiohttp WebSocket: a writer task sends what gathered as one message."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from aiohttp import WSCloseCode, WSMsgType, web

from roost.tls import certificate_user
from roost.write_batch import FLUSH_AT, WriteBatch

__all__ = ["FLUSH_AT", "SansIOSession", "TcpPlumbing", "WebSocketPlumbing"]


class SansIOSession(Protocol):
    """What the plumbing needs of a session: bytes in, the end of the socket, a reason."""

    close_reason: str

    def data_received(self, data: bytes) -> None: ...

    def connection_lost(self) -> None: ...


S = TypeVar("S", bound=SansIOSession)


class TcpPlumbing(asyncio.Protocol, Generic[S]):
    """An asyncio Protocol that runs one sans-IO session of type ``S`` and is the
    transport that session writes to."""

    def __init__(self) -> None:
        self.peer = "?"
        self.tls = False
        self.cert_user: str | None = None
        self.session: S | None = None
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_event_loop()
        self._batch = WriteBatch(self._flush, self._loop.call_soon)
        # Queue ``data`` for the socket; a memoryview (a stream-protocol chunk as read
        # from its segment) is handed to the socket as it is, without being joined. The
        # batch's own (compiled) method, so that a session's write is no Python call.
        self.write: Callable[[bytes | memoryview], None] = self._batch.write
        self._reading = True

    # -- what an adapter says ----------------------------------------------------------

    def start(self) -> S:
        """The session for this connection, made once the socket is accepted (peer, tls
        and cert_user are known); the loop is its clock (``self.clock``)."""
        raise NotImplementedError

    def writable_changed(self, writable: bool) -> None:
        """The socket's buffer filled (False) or drained (True)."""

    @property
    def clock(self) -> asyncio.AbstractEventLoop:
        return self._loop

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = transport.get_extra_info("ssl_object") is not None
        self.cert_user = certificate_user(transport) if self.tls else None
        self.session = self.start()

    def data_received(self, data: bytes) -> None:
        session = self.session
        assert session is not None
        batch = self._batch
        batch.in_receive = True
        try:
            session.data_received(data)
        finally:
            batch.in_receive = False
            self._flush()

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        session, self.session = self.session, None  # (it refers back to us)
        if session is not None:
            if exc is not None and not session.close_reason:
                session.close_reason = f"connection lost ({exc})"
            session.connection_lost()
        self._transport = None

    def pause_writing(self) -> None:
        self.writable_changed(False)

    def resume_writing(self) -> None:
        self.writable_changed(True)

    # -- the session's transport -------------------------------------------------------

    def flush_soon(self) -> None:
        """Output is due that the session makes at flush time (AMQP's confirms): at the
        end of the read being handled, else at the next turn of the loop."""
        self._batch.flush_soon()

    def flush(self) -> None:
        """Send what is queued now (a session that worked outside a read)."""
        self._flush()

    def _flush(self) -> int:
        """Write what is queued in one ``transport.write``; the bytes written."""
        batch = self._batch
        if not batch.parts:
            batch.flush_scheduled = False
            return 0
        size, views = batch.size, batch.views
        out = batch.take()
        transport = self._transport
        if transport is None or transport.is_closing():
            return 0
        if views:  # uvloop keeps the views and sends them with writev: no join
            transport.writelines(out)
            return size
        data = out[0] if len(out) == 1 else b"".join(out)
        transport.write(data)
        return len(data)

    def close(self, *, going_away: bool = False) -> None:
        """Send what is queued, then close (the socket's buffer is still sent); going
        away only means something to a WebSocket."""
        self._flush()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the socket and what is queued for it."""
        if self._transport is not None:
            self._transport.abort()

    def pause_reading(self) -> None:
        transport = self._transport
        if transport is not None and self._reading and not transport.is_closing():
            self._reading = False
            transport.pause_reading()

    def resume_reading(self) -> None:
        transport = self._transport
        if transport is not None and not self._reading and not transport.is_closing():
            self._reading = True
            transport.resume_reading()


# -- WebSocket (aiohttp) ---------------------------------------------------------------

# queued output that pauses deliveries until the socket drains, as pause_writing does
PAUSE_AT = 1024 * 1024


class _CoreSession(Protocol):
    def set_writable(self, writable: bool) -> None: ...


class WebSocketSession(SansIOSession, Protocol):
    """A session served over a WebSocket also says whether it has closed and has the
    core session that deliveries pause on."""

    closed: bool

    @property
    def session(self) -> _CoreSession | None: ...


W = TypeVar("W", bound=WebSocketSession)


def _is_utf8(data: bytes) -> bool:
    if data.isascii():  # one fast scan: most text protocols' traffic is ASCII
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class WebSocketPlumbing(Generic[W]):
    """The transport of a session over an aiohttp WebSocket: the session writes
    synchronously into a queue; a writer task sends what has gathered as one message.
    Deliveries pause while more than PAUSE_AT bytes wait. With ``text`` (STOMP),
    messages in may be text, and output goes as text when it is valid UTF-8, else as
    binary; without (MQTT), a text message in is bad input and output is binary."""

    def __init__(self, ws: web.WebSocketResponse, request: web.Request, *, text: bool) -> None:
        self.ws = ws
        self.text = text
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = request.secure
        self.cert_user = certificate_user(request.transport) if request.secure else None
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.session: W | None = None
        self.queued = 0
        self.paused = False
        self.going_away = False
        # cleared while the session's ReadGate holds input (roost/backpressure.py): the
        # next message stays in aiohttp's reader, which stops reading the socket once
        # it holds 2 x 256 KiB (its WebSocketDataQueue limit), so TCP pushes back
        self.reading = asyncio.Event()
        self.reading.set()

    @property
    def clock(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def write(self, data: bytes) -> None:
        self.queue.put_nowait(data)
        self.queued += len(data)
        if not self.paused and self.queued > PAUSE_AT:
            self._set_writable(False)

    def _set_writable(self, writable: bool) -> None:
        self.paused = not writable
        session = self.session
        if session is not None and session.session is not None and not session.closed:
            session.session.set_writable(writable)

    def close(self, *, going_away: bool = False) -> None:
        """Send what is queued, then close: 1001 when the server is going away, else
        1000."""
        self.going_away = self.going_away or going_away
        self.queue.put_nowait(None)
        self.reading.set()

    def abort(self) -> None:
        self.queue.put_nowait(None)
        self.reading.set()

    def pause_reading(self) -> None:
        self.reading.clear()

    def resume_reading(self) -> None:
        self.reading.set()

    async def serve(self, session: W) -> None:
        """Feed the WebSocket's messages to ``session`` until either side closes."""
        self.session = session
        ws = self.ws
        writer = asyncio.create_task(self._run_writer())
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    session.data_received(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    if not self.text:
                        session.close_reason = "text WebSocket message"
                        break
                    session.data_received(msg.data.encode("utf-8"))
                elif msg.type == WSMsgType.ERROR:  # aiohttp has closed it (1009, 1002, …)
                    session.close_reason = session.close_reason or f"WebSocket error: {msg.data}"
                    break
                if session.closed:
                    break
                if not self.reading.is_set():  # the next message waits in the socket
                    await self.reading.wait()
                    if session.closed:
                        break
        finally:
            session.connection_lost()
            self.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer, 2.0)
            writer.cancel()
            # the session refers back to the transport (it writes through it), and so do
            # an adapter's helpers that reach the session only through ``session`` (Web
            # STOMP's effects): dropping it here is what lets a closed connection be freed
            # by refcount, with no full collection (tests/*/test_ws_release.py)
            self.session = None
            _drop_tracebacks(ws.exception())  # a reset socket's: its frames refer back to ws

    async def _run_writer(self) -> None:
        ws = self.ws
        while True:
            data = await self.queue.get()
            if data is None:
                break
            # gather what is already queued into one WebSocket message
            chunks = [data]
            while not self.queue.empty():
                more = self.queue.get_nowait()
                if more is None:
                    self.queue.put_nowait(None)
                    break
                chunks.append(more)
            payload = b"".join(chunks)
            self.queued -= len(payload)
            try:
                # text when it is UTF-8, sent as the bytes they are (send_str would
                # decode and encode them again)
                text = self.text and _is_utf8(payload)
                await ws.send_frame(payload, WSMsgType.TEXT if text else WSMsgType.BINARY)
            except ConnectionError:
                break
            if self.paused and self.queued <= PAUSE_AT // 4:
                self._set_writable(True)
        await ws.close(code=WSCloseCode.GOING_AWAY if self.going_away else WSCloseCode.OK)


def _drop_tracebacks(error: BaseException | None) -> None:
    """Forget the frames of an error and of those it came from: they hold the response
    that holds the error, a cycle only a full collection would free."""
    while error is not None and error.__traceback__ is not None:
        error.__traceback__ = None
        error = error.__cause__ or error.__context__
