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
where writability goes (``writable_changed``)."""

from __future__ import annotations

import asyncio
from typing import Generic, Protocol, TypeVar

from roost.tls import certificate_user

# as in the AMQP adapter: a big backlog goes out at once rather than at the end of the turn
FLUSH_AT = 256 * 1024


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
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._in_receive = False
        self._flush_scheduled = False
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
        self._in_receive = True
        try:
            session.data_received(data)
        finally:
            self._in_receive = False
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

    def write(self, data: bytes) -> None:
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= FLUSH_AT:
            self._flush()
        elif not self._in_receive and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(out[0] if len(out) == 1 else b"".join(out))

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
