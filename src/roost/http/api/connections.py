"""/api/connections: list (``?state=closed`` lists recently closed ones with the reason
each closed: a Roost addition), get, DELETE to close with a reason, a connection's
channels."""

from __future__ import annotations

from aiohttp import web

from roost.core.errors import NotFound
from roost.core.info import ConnectionInfo
from roost.http import serialize as ser
from roost.http.api.channels import visible_channels
from roost.http.auth import sees_everything
from roost.http.cluster import elsewhere, gather
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.util import MANAGEMENT, access, forbidden, not_found


def visible_connections(
    request: web.Request, vhost: str | None = None, *, closed: bool = False
) -> list[ConnectionInfo]:
    """Monitoring and administrator users see every connection; others their own."""
    me = user(request)
    found = management(request).activity.list_connections(vhost, closed=closed)
    return found if sees_everything(me) else [c for c in found if c.user == me.name]


def _connection(request: web.Request) -> ConnectionInfo:
    name, me = request.match_info["name"], user(request)
    info = management(request).activity.connection_info(name)
    if not sees_everything(me) and info.user != me.name:
        raise not_found()  # as RabbitMQ: other users' connections do not exist for you
    return info


@access(MANAGEMENT)
async def list_connections(request: web.Request) -> web.Response:
    closed = request.query.get("state") == "closed"
    own = [ser.connection(c) for c in visible_connections(request, closed=closed)]
    return listing(request, await gather(request, own))


async def _on_another_node(request: web.Request) -> web.Response:
    """A connection this node does not have may be another member's (a cluster)."""
    found = await elsewhere(request)
    if found is None:
        raise not_found(f"no connection '{request.match_info['name']}'")
    return found


@access(MANAGEMENT)
async def get_connection(request: web.Request) -> web.Response:
    try:
        info = _connection(request)
    except NotFound:
        return await _on_another_node(request)
    return web.json_response(ser.connection(info))


@access(MANAGEMENT)
async def delete_connection(request: web.Request) -> web.Response:
    try:
        info = _connection(request)
    except NotFound:
        return await _on_another_node(request)
    me = user(request)
    if info.user != me.name and not me.has_tag("administrator"):
        raise forbidden("Not administrator user")
    # RabbitMQ takes the reason from this header; the UI and rabbitmqadmin send it
    reason = request.headers.get("X-Reason", "Closed via management plugin")
    management(request).operations.close_connection(info.name, reason)
    return web.Response(status=204)


@access(MANAGEMENT)
async def connection_channels(request: web.Request) -> web.Response:
    info = _connection(request)
    return listing(
        request,
        [ser.channel(c) for c in visible_channels(request) if c.connection.name == info.name],
    )


ROUTES = [
    Route(
        "GET",
        "/api/connections",
        list_connections,
        "Open connections",
        listing=True,
        query=("state",),
    ),
    Route("GET", "/api/connections/{name}", get_connection, "One connection"),
    Route(
        "DELETE",
        "/api/connections/{name}",
        delete_connection,
        "Close a connection (reason in the X-Reason header)",
    ),
    Route(
        "GET",
        "/api/connections/{name}/channels",
        connection_channels,
        "A connection's channels",
        listing=True,
    ),
]
