"""The Prometheus listener (``--prometheus-port``, 15692 as RabbitMQ's): ``/metrics``,
``/metrics/per-object`` and ``/metrics/detailed``, and nothing else, without
authentication, as ``rabbitmq_prometheus`` serves them, so a scrape config written for
RabbitMQ works unchanged."""

from __future__ import annotations

from aiohttp import web

from roost.core.ports.management import ManagementPort
from roost.http import metrics, metrics_detailed
from roost.http.keys import PORT


async def unknown_registry(request: web.Request) -> web.Response:
    return web.Response(status=404, text="Unknown Registry")


def create_prometheus_app(port: ManagementPort) -> web.Application:
    app = web.Application()
    app[PORT] = port
    app.router.add_get("/metrics", metrics.handler)
    app.router.add_get("/metrics/{kind:per-object}", metrics.handler)
    app.router.add_get("/metrics/detailed", metrics_detailed.handler)
    app.router.add_get("/metrics/{registry}", unknown_registry)
    return app
