"""A closed STOMP-over-WebSocket connection is freed as soon as its request handler
returns, by reference counting alone (issue 19's churn): its STOMP handler, core session
and client were held in a cycle (the handler's wake, a bound method of its ``_Effects``,
whose ``handler`` is the handler) that only a full collection frees, and the server's GC
tuning (server_process.tune_gc) all but never runs one: 30,000 churned connections grew
the broker by 40 MB. In process, over an in-memory broker, with a real aiohttp client;
the collector is off while connections open and close, so only refcounts free. Live
objects are counted by type among the collector's tracked objects rather than watched
with weak references: the compiled build's classes take no weak references."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from roost.stomp.handler import StompHandler, StompSettings
from roost.stomp.ws import create_app, stomp_websocket
from tests.brokers import memory_broker
from tests.support import live_objects as live
from tests.support import start_site

CONNECT = "CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nhost:/\n\n\x00"
SUBSCRIBE = "SUBSCRIBE\nid:s\ndestination:/topic/t\nack:client\nreceipt:r\n\n\x00"
SEND = "SEND\ndestination:/topic/t\n\nhello\x00"


async def _until(ws: aiohttp.ClientWebSocketResponse, command: str) -> None:
    while True:
        msg = await asyncio.wait_for(ws.receive(), 10)
        assert msg.type == aiohttp.WSMsgType.TEXT, msg
        if msg.data.startswith(command) or f"\x00{command}" in msg.data:
            return


@pytest.mark.parametrize(
    "way", ["disconnect", "unacked-then-disconnect", "dropped", "dropped-mid-frame"]
)
def test_a_closed_websocket_connection_is_freed_without_the_collector(way: str) -> None:
    async def main() -> None:
        registry: set[Any] = set()
        broker = memory_broker()
        app = create_app(broker, StompSettings(), registry)
        returned: asyncio.Queue[None] = asyncio.Queue()

        async def tracked(request: web.Request) -> web.StreamResponse:
            try:
                return await stomp_websocket(request)
            finally:
                returned.put_nowait(None)

        app.router.add_get("/tracked", tracked)
        runner, port = await start_site(app)
        try:
            async with aiohttp.ClientSession() as http:
                for _ in range(3):  # a few, as churn makes them
                    kinds, during = await one(http, port, registry)
                    await asyncio.wait_for(returned.get(), 10)
                    assert not registry
                    after = live(kinds)  # each kind: the one this connection had is gone
                    held = [name for name in kinds if after[name] != during[name] - 1]
                    assert held == [], f"still held after {way}: {held} ({during} -> {after})"
            assert len(broker.connections) == 0
        finally:
            await runner.cleanup()

    async def one(
        http: aiohttp.ClientSession, port: int, registry: set[Any]
    ) -> tuple[dict[str, type], dict[str, int]]:
        ws = await http.ws_connect(f"http://127.0.0.1:{port}/tracked", protocols=["v12.stomp"])
        await ws.send_str(CONNECT)
        await _until(ws, "CONNECTED")
        if way == "unacked-then-disconnect":
            await ws.send_str(SUBSCRIBE + SEND)
            await _until(ws, "MESSAGE")  # never acked
        [handler] = registry
        assert isinstance(handler, StompHandler) and handler.client is not None
        kinds: dict[str, type] = {"handler": StompHandler, "client": type(handler.client)}
        if handler.session is not None:
            kinds["session"] = type(handler.session)
        del handler
        during = live(kinds)
        if way in ("disconnect", "unacked-then-disconnect"):
            await ws.send_str("DISCONNECT\nreceipt:bye\n\n\x00")
            await _until(ws, "RECEIPT")
            await ws.close()
        else:
            if way == "dropped-mid-frame":
                await ws.send_str("SEND\ndestination:/queue/q\ncontent-length:100\n\nxx")
            transport = ws._response.connection.transport  # type: ignore[union-attr]
            transport.abort()  # no close frame
            await ws.close()
        return kinds, during

    gc.collect()  # earlier tests' garbage is not this test's
    gc.disable()
    try:
        asyncio.run(main())
    finally:
        gc.enable()
