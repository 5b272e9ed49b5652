"""asyncio Protocol for MQTT over TCP (and TLS): owns the socket and batches writes per
loop iteration; the MQTT logic is ``MQTTSession``'s, shared with the WebSocket endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

from roost.core import AdapterPort
from roost.mqtt.retained import MQTTState
from roost.mqtt.session import MQTTSession, MQTTSettings
from roost.tls import certificate_user

FLUSH_AT = 256 * 1024  # as the other adapters: a big backlog goes out at once


class MQTTServerProtocol(asyncio.Protocol):
    def __init__(
        self, port: AdapterPort, settings: MQTTSettings, state: MQTTState, registry: set[Any]
    ) -> None:
        self.port = port
        self.settings = settings
        self.state = state
        self.registry = registry
        self.peer = "?"
        self.tls = False
        self.cert_user: str | None = None
        self.session: MQTTSession | None = None
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_event_loop()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._in_receive = False
        self._flush_scheduled = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = transport.get_extra_info("ssl_object") is not None
        self.cert_user = certificate_user(transport) if self.tls else None
        self.session = MQTTSession(
            self.port, self.settings, self, self.state, self.registry, clock=self._loop
        )

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
        session = self.session
        if session is not None:
            if exc is not None and not session.close_reason:
                session.close_reason = f"connection lost ({exc})"
            session.connection_lost()
            self.session = None  # no cycle between the session and its transport

    def pause_writing(self) -> None:
        core = self.session.session if self.session is not None else None
        if core is not None:
            core.set_writable(False)

    def resume_writing(self) -> None:
        core = self.session.session if self.session is not None else None
        if core is not None:
            core.set_writable(True)

    # -- MQTTTransport --------------------------------------------------------------------

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
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
