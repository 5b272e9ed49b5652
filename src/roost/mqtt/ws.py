"""MQTT over WebSocket (RabbitMQ Web-MQTT's port 15675 and path /ws, subprotocol
``mqtt``): each binary WebSocket message is bytes for ``MQTTSession`` (a message may hold
several packets or part of one), and what the session writes goes out as binary
messages, gathered per loop iteration by a writer task (``WebSocketPlumbing``,
roost/plumbing.py, shared with Web-STOMP)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.core import AdapterPort
from roost.mqtt.retained import MQTTState
from roost.mqtt.session import MQTTSession, MQTTSettings
from roost.plumbing import WebSocketPlumbing

SUBPROTOCOLS = ("mqtt", "mqttv3.1")
PORT_KEY: web.AppKey[AdapterPort] = web.AppKey("port", AdapterPort)
SETTINGS_KEY: web.AppKey[MQTTSettings] = web.AppKey("mqtt_settings", MQTTSettings)
STATE_KEY: web.AppKey[MQTTState] = web.AppKey("mqtt_state", MQTTState)
REGISTRY_KEY: web.AppKey[set[Any]] = web.AppKey("registry", set)


async def mqtt_websocket(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    ws = web.WebSocketResponse(
        protocols=SUBPROTOCOLS, heartbeat=None, max_msg_size=settings.max_packet_size + 16
    )
    await ws.prepare(request)
    transport = WebSocketPlumbing[MQTTSession](ws, request, text=False)
    session = MQTTSession(
        request.app[PORT_KEY], settings, transport, request.app[STATE_KEY],
        request.app[REGISTRY_KEY], clock=transport.clock, protocol="Web MQTT",
    )
    await transport.serve(session)
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
