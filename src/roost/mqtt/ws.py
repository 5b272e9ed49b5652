"""MQTT over WebSocket (RabbitMQ Web-MQTT's port 15675 and path /ws, subprotocol
``mqtt``): each binary WebSocket message is bytes for ``MQTTSession`` (a message may hold
several packets or part of one), and what the session writes goes out as binary
messages, gathered per loop iteration by a writer task."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import WSMsgType, web

from roost.core import AdapterPort
from roost.mqtt.retained import MQTTState
from roost.mqtt.session import MQTTSession, MQTTSettings
from roost.tls import certificate_user

SUBPROTOCOLS = ("mqtt", "mqttv3.1")
PORT_KEY: web.AppKey[AdapterPort] = web.AppKey("port", AdapterPort)
SETTINGS_KEY: web.AppKey[MQTTSettings] = web.AppKey("mqtt_settings", MQTTSettings)
STATE_KEY: web.AppKey[MQTTState] = web.AppKey("mqtt_state", MQTTState)
REGISTRY_KEY: web.AppKey[set[Any]] = web.AppKey("registry", set)
PAUSE_AT = 1024 * 1024  # queued output that pauses deliveries until the socket drains


class WebSocketTransport:
    def __init__(
        self, ws: web.WebSocketResponse, peer: str, tls: bool, cert_user: str | None = None
    ) -> None:
        self.ws = ws
        self.peer = peer
        self.tls = tls
        self.cert_user = cert_user
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.session: MQTTSession | None = None
        self.queued = 0
        self.paused = False
        # cleared while the session's ReadGate holds input (roost/backpressure.py): the
        # next message stays in aiohttp's reader, which stops reading the socket once it
        # holds 2 x 256 KiB, so TCP pushes back
        self.reading = asyncio.Event()
        self.reading.set()

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

    def close(self) -> None:
        self.queue.put_nowait(None)
        self.reading.set()

    def pause_reading(self) -> None:
        self.reading.clear()

    def resume_reading(self) -> None:
        self.reading.set()

    async def run_writer(self) -> None:
        ws = self.ws
        while True:
            data = await self.queue.get()
            if data is None:
                break
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
                await ws.send_bytes(payload)
            except ConnectionError:
                break
            if self.paused and self.queued <= PAUSE_AT // 4:
                self._set_writable(True)
        await ws.close()


async def mqtt_websocket(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    ws = web.WebSocketResponse(
        protocols=SUBPROTOCOLS, heartbeat=None, max_msg_size=settings.max_packet_size + 16
    )
    await ws.prepare(request)
    peer = request.transport.get_extra_info("peername") if request.transport else None
    transport = WebSocketTransport(
        ws, f"{peer[0]}:{peer[1]}" if peer else "?", request.secure,
        certificate_user(request.transport) if request.secure else None,
    )
    session = MQTTSession(
        request.app[PORT_KEY], settings, transport, request.app[STATE_KEY],
        request.app[REGISTRY_KEY], clock=asyncio.get_running_loop(), protocol="Web MQTT",
    )
    transport.session = session
    writer = asyncio.create_task(transport.run_writer())
    try:
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                session.data_received(msg.data)
            elif msg.type == WSMsgType.TEXT:  # MQTT is binary: a text message is bad input
                session.close_reason = "text WebSocket message"
                break
            elif msg.type == WSMsgType.ERROR:
                session.close_reason = session.close_reason or f"WebSocket error: {msg.data}"
                break
            if session.closed:
                break
            if not transport.reading.is_set():  # the next message waits in the socket
                await transport.reading.wait()
                if session.closed:
                    break
    finally:
        session.connection_lost()
        transport.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer, 2.0)
        writer.cancel()
        transport.session = None
    return ws


def create_app(
    port: AdapterPort, settings: MQTTSettings, state: MQTTState, registry: set[Any]
) -> web.Application:
    app = web.Application()
    app[PORT_KEY] = port
    app[SETTINGS_KEY] = settings
    app[STATE_KEY] = state
    app[REGISTRY_KEY] = registry
    app.router.add_get("/ws", mqtt_websocket)
    return app
