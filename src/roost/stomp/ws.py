"""STOMP over WebSocket (RabbitMQ Web-STOMP's port and path): aiohttp WebSocket
messages <-> ``StompHandler``. Text and binary messages are both accepted, fragmented
ones too (aiohttp reassembles continuation frames); a message may hold several frames or
part of one (the handler's parser reassembles). Outgoing frames go as text messages when
they are valid UTF-8, else as binary.

Close codes: 1000 after a DISCONNECT or an ERROR, 1001 (going away) when the server
stops, 1009 for a WebSocket message larger than the STOMP frame limit plus ``WS_SLACK``
(the STOMP limits themselves are the parser's: ERROR, then 1000)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from roost.core import AdapterPort
from roost.stomp.handler import StompHandler, StompSettings
from roost.tls import certificate_user

log = logging.getLogger("roost.stomp")

SUBPROTOCOLS = ("v12.stomp", "v11.stomp", "v10.stomp")
BROKER_KEY: web.AppKey[AdapterPort] = web.AppKey("broker", AdapterPort)
SETTINGS_KEY: web.AppKey[StompSettings] = web.AppKey("stomp_settings", StompSettings)
REGISTRY_KEY: web.AppKey[set[Any]] = web.AppKey("registry", set)
PAGE_DIR = Path(__file__).parent / "test_page"
TEST_PAGE_PATH = "/stomp/test/"


PAUSE_AT = 1024 * 1024  # queued output that pauses deliveries until the socket drains
# aiohttp buffers a whole WebSocket message before the STOMP parser sees it, so its own
# limit is the STOMP frame limit plus room for EOLs and a few small frames batched with
# it: a frame just over the STOMP limit still gets the STOMP ERROR, and a giant message
# is refused (1009) before it is held in memory
WS_SLACK = 64 * 1024


def _is_utf8(data: bytes) -> bool:
    if data.isascii():  # one fast scan: most STOMP traffic is ASCII
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class WebSocketTransport:
    """Queues frames for a writer task: the handler writes synchronously. Deliveries
    pause while more than PAUSE_AT bytes wait, as TCP's pause_writing does."""

    def __init__(self, ws: web.WebSocketResponse, peer: str, cert_user: str | None) -> None:
        self.ws = ws
        self.peer = peer
        self.cert_user = cert_user
        self.tls = False
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.handler: StompHandler | None = None
        self.queued = 0
        self.paused = False
        self.going_away = False
        # cleared while the handler's ReadGate holds input (roost/backpressure.py): the
        # next message stays in aiohttp's reader, which stops reading the socket once
        # it holds 2 x 256 KiB (its WebSocketDataQueue limit), so TCP pushes back
        self.reading = asyncio.Event()
        self.reading.set()

    def write(self, data: bytes) -> None:
        self.queue.put_nowait(data)
        self.queued += len(data)
        if not self.paused and self.queued > PAUSE_AT:
            self._set_writable(False)

    def _set_writable(self, writable: bool) -> None:
        self.paused = not writable
        handler = self.handler
        if handler is not None and handler.session is not None and not handler.closed:
            handler.session.set_writable(writable)

    def close(self, *, going_away: bool = False) -> None:
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

    async def run_writer(self) -> None:
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
                # as text when it is UTF-8, sent as the bytes they are (send_str would
                # decode and encode them again)
                opcode = WSMsgType.TEXT if _is_utf8(payload) else WSMsgType.BINARY
                await ws.send_frame(payload, opcode)
            except ConnectionError:
                break
            if self.paused and self.queued <= PAUSE_AT // 4:
                self._set_writable(True)
        await ws.close(code=WSCloseCode.GOING_AWAY if self.going_away else WSCloseCode.OK)


async def stomp_websocket(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    ws = web.WebSocketResponse(
        protocols=SUBPROTOCOLS,
        heartbeat=None,
        max_msg_size=settings.limits.max_frame_size + WS_SLACK,
    )
    await ws.prepare(request)
    peer = request.transport.get_extra_info("peername") if request.transport else None
    peer_text = f"{peer[0]}:{peer[1]}" if peer else "?"
    transport = WebSocketTransport(ws, peer_text, certificate_user(request.transport))
    transport.tls = request.secure
    handler = StompHandler(
        request.app[BROKER_KEY],
        settings,
        transport,
        request.app[REGISTRY_KEY],
        clock=asyncio.get_running_loop(),
        protocol="Web STOMP",
    )
    transport.handler = handler
    writer = asyncio.create_task(transport.run_writer())
    try:
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                handler.data_received(msg.data.encode("utf-8"))
            elif msg.type == WSMsgType.BINARY:
                handler.data_received(msg.data)
            elif msg.type == WSMsgType.ERROR:  # aiohttp has closed it (1009, 1002, …)
                handler.close_reason = handler.close_reason or f"WebSocket error: {msg.data}"
                break
            if handler.closed:
                break
            if not transport.reading.is_set():  # the next message waits in the socket
                await transport.reading.wait()
                if handler.closed:
                    break
    finally:
        handler.connection_lost()
        transport.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer, 2.0)
        writer.cancel()
        transport.handler = None  # (it refers back to the transport)
        _drop_tracebacks(ws.exception())  # a reset socket's: its frames refer back to ws
    return ws


def _drop_tracebacks(error: BaseException | None) -> None:
    """Forget the frames of an error and of those it came from: they hold the response
    that holds the error, a cycle only a full collection would free."""
    while error is not None and error.__traceback__ is not None:
        error.__traceback__ = None
        error = error.__cause__ or error.__context__


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
