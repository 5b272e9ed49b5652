"""STOMP over WebSocket (RabbitMQ Web-STOMP's port and path): aiohttp WebSocket
messages <-> ``StompHandler``, through ``WebSocketPlumbing`` (roost/plumbing.py), the
session's effects carried out by ``_Effects``. Text
and binary messages are both accepted, fragmented ones too (aiohttp reassembles
continuation frames); a message may hold several frames or part of one (the handler's
parser reassembles). Outgoing frames go as text messages when they are valid UTF-8,
else as binary.

Close codes: 1000 after a DISCONNECT or an ERROR, 1001 (going away) when the server
stops, 1009 for a WebSocket message larger than the STOMP frame limit plus ``WS_SLACK``
(the STOMP limits themselves are the parser's: ERROR, then 1000)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from aiohttp import web

from roost.core import AdapterPort
from roost.lifecycle import Timers
from roost.plumbing import WebSocketPlumbing
from roost.stomp.effects import apply
from roost.stomp.handler import StompHandler, StompSettings

log = logging.getLogger("roost.stomp")

SUBPROTOCOLS = ("v12.stomp", "v11.stomp", "v10.stomp")
BROKER_KEY: web.AppKey[AdapterPort] = web.AppKey("broker", AdapterPort)
SETTINGS_KEY: web.AppKey[StompSettings] = web.AppKey("stomp_settings", StompSettings)
REGISTRY_KEY: web.AppKey[set[Any]] = web.AppKey("registry", set)
PAGE_DIR = Path(__file__).parent / "test_page"
TEST_PAGE_PATH = "/stomp/test/"


# aiohttp buffers a whole WebSocket message before the STOMP parser sees it, so its own
# limit is the STOMP frame limit plus room for EOLs and a few small frames batched with
# it: a frame just over the STOMP limit still gets the STOMP ERROR, and a giant message
# is refused (1009) before it is held in memory
WS_SLACK = 64 * 1024


async def stomp_websocket(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    ws = web.WebSocketResponse(
        protocols=SUBPROTOCOLS,
        heartbeat=None,
        max_msg_size=settings.limits.max_frame_size + WS_SLACK,
    )
    await ws.prepare(request)
    transport = WebSocketPlumbing[StompHandler](ws, request, text=True)
    effects = _Effects(transport)
    handler = StompHandler(
        request.app[BROKER_KEY],
        settings,
        transport,
        request.app[REGISTRY_KEY],
        clock=transport.clock,
        wake=effects.wake,
        protocol="Web STOMP",
    )
    transport.session = handler  # (serve sets it too; the deadline below reads it now)
    effects.apply()  # the CONNECT deadline the new session started
    try:
        await transport.serve(handler)
    finally:
        effects.timers.cancel_all()
    return ws


class _Effects:
    """Carries the session's effects (stomp/effects.py) out on the WebSocket: bytes once
    per loop turn (the writer task sends what gathered as one message), a close, a pause,
    resume or timer at once, so ``serve`` sees it right after the message that caused
    it.

    The handler holds ``wake``, a method of this object, so this object reaches the
    handler only through the plumbing's ``session``, which the plumbing drops once the
    WebSocket is done: a reference of its own here made a cycle that kept every closed
    connection (handler, core session, client, aiohttp request) until a full
    collection, which the server's GC tuning makes rare (issue 19's churn)."""

    def __init__(self, transport: WebSocketPlumbing[StompHandler]) -> None:
        self.transport = transport
        self.timers = Timers(transport.clock)  # the session's, by name
        self._scheduled = False

    @property
    def handler(self) -> StompHandler | None:
        return self.transport.session

    def wake(self, now: bool) -> None:
        if now:
            self.apply()
        elif not self._scheduled:
            self._scheduled = True
            self.transport.clock.call_soon(self.apply)

    def apply(self) -> None:
        self._scheduled = False
        if self.handler is not None and self.handler.effects:
            apply(self.handler.take_effects(), self)

    def _timer_fired(self, name: str) -> None:
        if self.handler is not None:
            self.handler.timer_fired(name)

    # -- stomp/effects.py's Target --------------------------------------------------------

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def close(self, *, going_away: bool = False) -> None:
        self.transport.close(going_away=going_away)

    def abort(self) -> None:
        self.transport.abort()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def start_timer(self, name: str, delay: float) -> None:
        self.timers.set(name, delay, self._timer_fired, name)

    def stop_timer(self, name: str) -> None:
        self.timers.cancel(name)


def create_app(
    broker: AdapterPort,
    settings: StompSettings,
    registry: set[Any],
    test_page_client: Path | None = None,
) -> web.Application:
    """The Web-STOMP endpoint at /ws; with ``test_page_client`` (a browser STOMP client,
    @stomp/stompjs's ``stomp.umd.min.js``) also the test page at /stomp/test/."""
    app = web.Application(client_max_size=settings.limits.max_frame_size + 1024)
    app[BROKER_KEY] = broker
    app[SETTINGS_KEY] = settings
    app[REGISTRY_KEY] = registry
    app.router.add_get("/ws", stomp_websocket)
    if test_page_client is not None:
        add_test_page(app, test_page_client)
    return app


def add_test_page(app: web.Application, client: Path) -> None:
    """Like RabbitMQ's web-stomp-examples, on the Web-STOMP listener itself so the page's
    WebSocket goes to its own origin. The client bundle is not Roost's to ship: it is read
    from where the operator (or scripts/test) put it, and only that one file is served."""
    files = {
        "": PAGE_DIR / "index.html",
        "page.js": PAGE_DIR / "page.js",
        "stomp.umd.min.js": client,
    }

    async def serve(request: web.Request) -> web.StreamResponse:
        path = files.get(request.match_info["name"])
        if path is None or not path.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(path, headers={"Cache-Control": "no-cache"})

    async def slash(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(TEST_PAGE_PATH)

    app.router.add_get(TEST_PAGE_PATH.rstrip("/"), slash)
    app.router.add_get(TEST_PAGE_PATH + "{name:[a-z.]*}", serve)
