"""asyncio plumbing for the stream protocol over TCP: owns the socket, batches writes
per turn of the loop, hands the loop in as the session's clock, and pauses reading when
the session's ``ReadGate`` asks (roost/backpressure.py: a congested queue, an alarm, a
turn's share of work done, unconfirmed publishes, a pending definition change). The
protocol logic is ``StreamSession``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from roost.core import AdapterPort
from roost.stream_protocol.session import StreamSession, StreamSettings
from roost.tls import certificate_user

log = logging.getLogger("roost.stream_protocol")

FLUSH_AT = 256 * 1024  # a big backlog goes out at once, as in the other adapters


class StreamServerProtocol(asyncio.Protocol):
    def __init__(self, port: AdapterPort, settings: StreamSettings, registry: set[Any]) -> None:
        self.port = port
        self.settings = settings
        self.registry = registry
        self.peer = "?"
        self.cert_user: str | None = None
        self.session: StreamSession | None = None
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_event_loop()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._in_receive = False
        self._flush_scheduled = False
        self._reading = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if transport.get_extra_info("ssl_object") is not None:
            self.cert_user = certificate_user(transport)
        self.session = StreamSession(self.port, self.settings, self, self._loop)
        self.registry.add(self)

    def data_received(self, data: bytes) -> None:
        assert self.session is not None
        self._in_receive = True
        try:
            self.session.data_received(data)
        finally:
            self._in_receive = False
            self._flush()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.registry.discard(self)
        if self.session is not None:
            if exc is not None and not self.session.close_reason:
                self.session.close_reason = f"connection lost ({exc})"
            self.session.connection_lost()

    def pause_writing(self) -> None:
        self._set_writable(False)

    def resume_writing(self) -> None:
        self._set_writable(True)

    def _set_writable(self, writable: bool) -> None:
        if self.session is not None:
            for sub in self.session.commands.subscriptions.values():
                if sub.session is not None:
                    sub.session.set_writable(writable)

    def shutdown(self, reason: str = "shutdown") -> None:
        if self.session is not None:
            self.session.force_close(reason)

    # -- the session's transport ----------------------------------------------------------

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

    def close(self) -> None:
        self._flush()
        if self._transport is not None:
            self._transport.close()

    def pause_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing() and self._reading:
            self._reading = False
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing() and not self._reading:
            self._reading = True
            self._transport.resume_reading()

    def _abort(self, reason: str) -> None:
        """The server's last step of a shutdown: drop what is still open."""
        if self.session is not None:
            self.session.close_reason = self.session.close_reason or reason
            self.session.connection_lost()
        if self._transport is not None:
            self._transport.abort()
