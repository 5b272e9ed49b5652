"""/api/vhost-limits and /api/user-limits: RabbitMQ's per-vhost and per-user limits.

``PUT /api/vhost-limits/{vhost}/{name}`` with ``{"value": N}`` sets ``max-connections``,
``max-queues`` or ``max-exchanges`` (Roost's own); ``PUT /api/user-limits/{user}/{name}``
sets ``max-connections`` or ``max-channels``. A negative value means no limit. Listings are
``[{"vhost": …, "value": {name: N}}]`` and ``[{"user": …, "value": {…}}]``, as RabbitMQ's.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.http.keys import management
from roost.http.routes import INT, Route, obj
from roost.http.util import ADMINISTRATOR, MONITORING, access, bad_request, read_json


async def _value(request: web.Request) -> Any:
    body = await read_json(request)
    if "value" not in body:
        raise bad_request("value missing")
    return body["value"]


@access(MONITORING)
async def list_vhost_limits(request: web.Request) -> web.Response:
    vhost = request.match_info.get("vhost")
    found = management(request).queries.vhost_limits(vhost)
    return web.json_response([{"vhost": v, "value": limits} for v, limits in found])


@access(ADMINISTRATOR)
async def put_vhost_limit(request: web.Request) -> web.Response:
    m = request.match_info
    management(request).definitions.put_vhost_limit(m["vhost"], m["name"], await _value(request))
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def delete_vhost_limit(request: web.Request) -> web.Response:
    m = request.match_info
    management(request).definitions.delete_vhost_limit(m["vhost"], m["name"])
    return web.Response(status=204)


@access(MONITORING)
async def list_user_limits(request: web.Request) -> web.Response:
    found = management(request).queries.list_user_limits(request.match_info.get("user"))
    return web.json_response([{"user": u, "value": limits} for u, limits in found])


@access(ADMINISTRATOR)
async def put_user_limit(request: web.Request) -> web.Response:
    m = request.match_info
    management(request).definitions.put_user_limit(m["user"], m["name"], await _value(request))
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def delete_user_limit(request: web.Request) -> web.Response:
    m = request.match_info
    management(request).definitions.delete_user_limit(m["user"], m["name"])
    return web.Response(status=204)


VALUE = obj({"value": INT}, ("value",))
ROUTES = [
    Route("GET", "/api/vhost-limits", list_vhost_limits, "Every vhost's limits"),
    Route("GET", "/api/vhost-limits/{vhost}", list_vhost_limits, "One vhost's limits"),
    Route(
        "PUT",
        "/api/vhost-limits/{vhost}/{name}",
        put_vhost_limit,
        "Set a vhost limit (max-connections, max-queues, max-exchanges)",
        body=VALUE,
    ),
    Route("DELETE", "/api/vhost-limits/{vhost}/{name}", delete_vhost_limit, "Clear a limit"),
    Route("GET", "/api/user-limits", list_user_limits, "Every user's limits"),
    Route("GET", "/api/user-limits/{user}", list_user_limits, "One user's limits"),
    Route(
        "PUT",
        "/api/user-limits/{user}/{name}",
        put_user_limit,
        "Set a user limit (max-connections, max-channels)",
        body=VALUE,
    ),
    Route("DELETE", "/api/user-limits/{user}/{name}", delete_user_limit, "Clear a limit"),
]
