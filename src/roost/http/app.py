"""The aiohttp application: management API, OpenAPI document, /metrics and the web UI.

``create_app(port, settings)`` builds it over the core's management port; the server runs
it on ``--http-port``. Three middlewares do what every API handler would otherwise
repeat: one authenticates and
checks the route's tag, one turns core errors into RabbitMQ's ``{"error", "reason"}``,
and one holds the reply to a request that changed something durable (a user, a policy,
a durable queue, …) until that change is fsync'ed.
A background task samples the broker's counters into rates every ``stats_interval``
seconds, and pushes them to StatsD when configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from roost.core.errors import (
    AccessRefused,
    BrokerError,
    InternalError,
    NotFound,
)
from roost.core.ports.management import ManagementPort
from roost.http import metrics, metrics_detailed, openapi, serialize
from roost.http.api import all_routes
from roost.http.auth import REALM, authenticate, require
from roost.http.keys import PORT, SETTINGS, USER_KEY, HttpSettings
from roost.http.statsd import StatsdPusher
from roost.http.util import MANAGEMENT, PUBLIC, HTTPProblem, not_found, problem_response

log = logging.getLogger("roost.http")

UI_DIR = Path(__file__).parent / "ui"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _status_for(exc: BrokerError) -> HTTPProblem:
    if isinstance(exc, NotFound):
        return not_found(exc.text)
    if isinstance(exc, AccessRefused):
        # RabbitMQ's JSON for a refused operation ("not_authorised", the AMQP reply text as
        # the reason); 403 rather than its 401, as for a missing tag (http/auth.py)
        return HTTPProblem(403, "not_authorised", f"ACCESS_REFUSED - {exc.text}")
    if isinstance(exc, InternalError):
        return HTTPProblem(500, "internal_error", exc.text)
    return HTTPProblem(400, "bad_request", exc.text)  # precondition, invalid, not allowed


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except HTTPProblem as p:
        # only a request without credentials is invited to log in: a browser page that
        # sent wrong ones gets no native password dialog
        prompt = p.status == 401 and p.reason == "Login required"
        return problem_response(p, {"WWW-Authenticate": REALM} if prompt else None)
    except BrokerError as exc:
        return problem_response(_status_for(exc))
    except web.HTTPException as exc:
        if exc.status == 404:
            return problem_response(not_found())
        if exc.status == 405:
            return problem_response(HTTPProblem(405, "method_not_allowed", exc.reason))
        if exc.status == 413:  # --http-max-body-size
            return problem_response(HTTPProblem(413, "payload_too_large", exc.text or exc.reason))
        raise


@web.middleware
async def durable(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A 2xx reply to a change means the change survives a crash: wait for the group
    commit that writes it (core.completion.Completion); reads never wait."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return await handler(request)
    completion = request.app[PORT].durable_from_here()
    response = await handler(request)
    written: asyncio.Future[BrokerError | None] = asyncio.get_running_loop().create_future()

    def done(error: BrokerError | None) -> None:
        if not written.done():
            written.set_result(error)

    if completion.then(done) and (error := await written) is not None:
        return problem_response(HTTPProblem(500, "internal_error", error.text))
    return response


@web.middleware
async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    level = getattr(handler, "roost_access", None)
    if level is None or level == PUBLIC:
        return await handler(request)
    user = authenticate(request.app[PORT], request)
    require(user, level or MANAGEMENT)
    request[USER_KEY] = user
    return await handler(request)


async def _sampler(app: web.Application) -> AsyncIterator[None]:
    broker, settings = app[PORT], app[SETTINGS]
    pusher = StatsdPusher.from_setting(settings.statsd, settings.statsd_prefix)

    async def loop() -> None:
        if pusher is not None:
            await pusher.open()
        while True:
            try:
                broker.activity.sample_rates()
                if pusher is not None:
                    pusher.push(broker)
            except Exception:  # a bad sample must not end sampling for good
                log.exception("sampling broker statistics failed")
            await asyncio.sleep(settings.stats_interval)

    task = asyncio.create_task(loop(), name="roost-stats-sampler")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    if pusher is not None:
        pusher.close()


class _MalformedRequests(logging.Filter):
    """aiohttp logs a malformed request (a NUL in a header, a bad request line) as an
    ERROR with a traceback. It is the client's fault and it got a 400: one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = f"{record.getMessage()}: {exc.message}"
            record.args = ()
            record.exc_info = record.exc_text = None
        return True


_quiet = _MalformedRequests()


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(UI_DIR / "index.html")


def create_app(port: ManagementPort, settings: HttpSettings | None = None) -> web.Application:
    server_log = logging.getLogger("aiohttp.server")
    if _quiet not in server_log.filters:
        server_log.addFilter(_quiet)
    settings = settings or HttpSettings()
    app = web.Application(
        middlewares=[errors, auth, durable], client_max_size=settings.max_body_size
    )
    app[PORT] = port
    serialize.NODE = port.activity.node_name  # every JSON's "node"
    app[SETTINGS] = settings
    routes = all_routes()
    for route in routes:
        app.router.add_route(route.method, route.path, route.handler)
    app.router.add_get("/api/openapi.json", openapi.handler(routes))
    app.router.add_get("/metrics", metrics.handler)
    app.router.add_get("/metrics/{kind:per-object}", metrics.handler)
    app.router.add_get("/metrics/detailed", metrics_detailed.handler)
    app.router.add_get("/", index)
    app.router.add_static("/ui/", UI_DIR, append_version=False)
    app.cleanup_ctx.append(_sampler)
    return app
