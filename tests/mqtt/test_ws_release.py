"""A closed MQTT-over-WebSocket connection is freed as soon as its request handler returns,
by reference counting alone, as a Web-STOMP one is (tests/stomp/test_ws_release.py): the
server's GC tuning (server_process.tune_gc) all but never runs a full collection, so a
connection kept by a reference cycle would stay for good. The session and the plumbing
refer to each other (the session writes through it; it feeds the session), so the
plumbing lets go of the session once the WebSocket is done.

In process, over an in-memory broker, with a real paho-mqtt client on its WebSocket
transport (on its own thread); the collector is off while connections open and close, so
only refcounts free. Live objects are counted by type among the collector's tracked
objects rather than watched with weak references: the compiled build's classes take no
weak references."""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

import pytest
from aiohttp import web

from roost.mqtt.retained import MQTTState
from roost.mqtt.session import MQTTSession, MQTTSettings
from roost.mqtt.ws import create_app, mqtt_websocket
from tests.brokers import memory_broker
from tests.mqtt.clients import Paho
from tests.support import live_objects as live
from tests.support import start_site


def _drop(client: Paho) -> None:
    """Close the TCP connection under the WebSocket: no DISCONNECT, no close frame."""
    wrapper = client.client.socket()
    client.client.loop_stop()
    raw: socket.socket = getattr(wrapper, "_socket", wrapper)  # paho's WebSocket wrapper
    raw.shutdown(socket.SHUT_RDWR)
    raw.close()
    client._close_wakeup()


@pytest.mark.parametrize("way", ["disconnect", "subscribed-then-disconnect", "dropped"])
def test_a_closed_websocket_connection_is_freed_without_the_collector(way: str) -> None:
    async def main() -> None:
        registry: set[Any] = set()
        broker = memory_broker()
        app = create_app(broker, MQTTSettings(), MQTTState(broker), registry)
        returned: asyncio.Queue[None] = asyncio.Queue()

        async def tracked(request: web.Request) -> web.StreamResponse:
            try:
                return await mqtt_websocket(request)
            finally:
                returned.put_nowait(None)

        app.router.add_get("/tracked", tracked)
        runner, port = await start_site(app)
        try:
            for n in range(3):  # a few, as churn makes them
                kinds, during = await one(port, registry, n)
                await asyncio.wait_for(returned.get(), 10)
                assert not registry
                after = live(kinds)  # each kind: the one this connection had is gone
                held = [name for name in kinds if after[name] != during[name] - 1]
                assert held == [], f"still held after {way}: {held} ({during} -> {after})"
            assert len(broker.connections) == 0
        finally:
            await runner.cleanup()

    async def one(port: int, registry: set[Any], n: int) -> tuple[dict[str, type], dict[str, int]]:
        def connect() -> Paho:
            client = Paho(port, f"release-{way}-{n}", transport="websockets", connect=False)
            client.client.ws_set_options(path="/tracked")
            client.connect()
            if way == "subscribed-then-disconnect":
                assert client.subscribe("release/t", 1) == [1]
                client.publish("release/t", b"hello", qos=1)
                assert client.get().payload == b"hello"
            return client

        client = await asyncio.to_thread(connect)
        [session] = registry
        assert isinstance(session, MQTTSession) and session.client is not None
        kinds: dict[str, type] = {"session": MQTTSession, "client": type(session.client)}
        if session.session is not None:
            kinds["core session"] = type(session.session)
        del session
        during = live(kinds)
        await asyncio.to_thread(_drop if way == "dropped" else Paho.close, client)
        return kinds, during

    gc.collect()  # earlier tests' garbage is not this test's
    gc.disable()
    try:
        asyncio.run(main())
    finally:
        gc.enable()
