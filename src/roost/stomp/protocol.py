"""asyncio Protocol for STOMP over TCP: owns the socket and batches writes; the STOMP
logic lives in ``StompHandler`` so the WebSocket endpoint shares it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from roost.core import AdapterPort
from roost.stomp.handler import StompHandler, StompSettings
from roost.tls import certificate_user

log = logging.getLogger("roost.stomp")

FLUSH_AT = 256 * 1024  # as in the AMQP adapter: big backlogs go out at once


class StompServerProtocol(asyncio.Protocol):
    def __init__(self, broker: AdapterPort, settings: StompSettings, registry: set[Any]) -> None:
        self.broker = broker
        self.settings = settings
        self.registry = registry
        self.peer = "?"
        self.cert_user: str | None = None
        self.tls = False
        self.handler: StompHandler | None = None
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_event_loop()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._in_receive = False
        self._flush_scheduled = False

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = transport.get_extra_info("ssl_object") is not None
        self.cert_user = certificate_user(transport) if self.tls else None
        self.handler = StompHandler(
            self.broker, self.settings, self, self.registry, clock=self._loop
        )
        log.debug("%s: accepted STOMP connection", self.peer)

    def data_received(self, data: bytes) -> None:
        assert self.handler is not None
        self._in_receive = True
        try:
            self.handler.data_received(data)
        finally:
            self._in_receive = False
            self._flush()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        handler, self.handler = self.handler, None  # (it refers back to us)
        if handler is not None:
            if exc is not None and not handler.close_reason:
                handler.close_reason = f"connection lost ({exc})"
            handler.connection_lost()
        self._transport = None

    def pause_writing(self) -> None:
        if self.handler is not None and self.handler.session is not None:
            self.handler.session.set_writable(False)

    def resume_writing(self) -> None:
        if self.handler is not None and self.handler.session is not None:
            self.handler.session.set_writable(True)

    # -- StompTransport -------------------------------------------------------------------

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
        self._flush()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def pause_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
