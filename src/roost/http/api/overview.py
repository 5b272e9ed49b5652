"""GET /api/overview: totals, message rates (with history for charts), listeners."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost import __version__
from roost.http.cluster import cluster_overview, is_local
from roost.http.keys import management
from roost.http.routes import STR, Route, obj
from roost.http.util import (
    ADMINISTRATOR,
    MANAGEMENT,
    access,
    bad_request,
    details,
    read_json,
    with_samples,
)

EXCHANGE_DESCRIPTIONS = {
    "direct": "AMQP direct exchange, as per the AMQP specification",
    "fanout": "AMQP fanout exchange, as per the AMQP specification",
    "headers": "AMQP headers exchange, as per the AMQP specification",
    "topic": "AMQP topic exchange, as per the AMQP specification",
}
CHURN = (
    "connection_created",
    "connection_closed",
    "channel_created",
    "channel_closed",
    "queue_declared",
    "queue_created",
    "queue_deleted",
)


def _age(request: web.Request, key: str) -> float:
    try:
        return max(0.0, min(float(request.query.get(key, "0")), 86400.0))
    except ValueError:
        return 0.0


@access(MANAGEMENT)
async def overview(request: web.Request) -> web.Response:
    info = management(request).activity.overview()
    r = info.rates
    # with lengths_age / msg_rates_age the details carry samples, as RabbitMQ's do
    lengths_age, rates_age = _age(request, "lengths_age"), _age(request, "msg_rates_age")

    def hist(name: str, age: float) -> dict[str, Any]:
        if not age:
            return details(r, name)
        cutoff = info.history.get(name, ())
        if cutoff:
            newest = cutoff[-1].timestamp
            cutoff = tuple(s for s in cutoff if s.timestamp >= newest - age * 1000)
        return with_samples(r.get(name), cutoff)

    t, m = info.totals, info.messages
    node = management(request).activity.node_name
    body = {
        "management_version": __version__,
        "rates_mode": "basic",
        "product_name": "Roost",
        "product_version": __version__,
        "rabbitmq_version": __version__,
        "python_version": info.node.python_version,
        "cluster_name": info.cluster_name,
        "node": node,
        "exchange_types": [
            {"name": n, "description": EXCHANGE_DESCRIPTIONS.get(n, ""), "enabled": True}
            for n in info.exchange_types
        ],
        "message_stats": {
            "publish": t.published,
            "publish_details": hist("publish", rates_age),
            "deliver_get": t.delivered,
            "deliver_get_details": hist("deliver_get", rates_age),
            "ack": t.acked,
            "ack_details": hist("ack", rates_age),
            "redeliver": t.redelivered,
            "redeliver_details": details(r, "redeliver"),
        },
        "churn_rates": {
            **{name: getattr(info.churn, name) for name in CHURN},
            **{f"{name}_details": details(r, name) for name in CHURN},
        },
        "queue_totals": {
            "messages": m.total,
            "messages_details": hist("messages", lengths_age),
            "messages_ready": m.ready,
            "messages_ready_details": hist("messages_ready", lengths_age),
            "messages_unacknowledged": m.unacknowledged,
            "messages_unacknowledged_details": hist("messages_unacknowledged", lengths_age),
        },
        "object_totals": info.object_totals,
        "listeners": [
            {"node": node, "protocol": li.protocol, "ip_address": li.ip_address, "port": li.port}
            for li in info.listeners
        ],
        "contexts": [
            {"node": node, "description": "Roost Management", "path": "/", "port": str(li.port)}
            for li in info.listeners
            if li.protocol in ("http", "https")
        ],
    }
    if not is_local(request):
        body = await cluster_overview(request, body)
    return web.json_response(body)


@access(MANAGEMENT)
async def cluster_name(request: web.Request) -> web.Response:
    return web.json_response({"name": management(request).activity.cluster_name})


@access(ADMINISTRATOR)
async def set_cluster_name(request: web.Request) -> web.Response:
    """RabbitMQ's: the ``cluster_name`` global parameter, which every AMQP connection
    opened from now on announces (and federation's loop detection compares)."""
    name = (await read_json(request)).get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("name must be a non-empty string")
    management(request).parameters.put_global_parameter("cluster_name", name)
    return web.Response(status=204)


@access(MANAGEMENT)
async def extensions(request: web.Request) -> web.Response:
    return web.json_response([])


ROUTES = [
    Route(
        "GET",
        "/api/overview",
        overview,
        "Totals, message rates and listeners",
        query=("lengths_age", "lengths_incr", "msg_rates_age", "msg_rates_incr"),
    ),
    Route("GET", "/api/cluster-name", cluster_name, "The cluster's name"),
    Route(
        "PUT",
        "/api/cluster-name",
        set_cluster_name,
        "Rename the cluster (the cluster_name global parameter)",
        body=obj({"name": STR}, ("name",)),
    ),
    Route("GET", "/api/extensions", extensions, "Management UI extensions (none)"),
]
