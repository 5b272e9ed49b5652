"""/api/vhosts: list, get, PUT (create / update metadata), DELETE; a vhost's
permissions, connections and channels."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.http import serialize as ser
from roost.http.api.channels import visible_channels
from roost.http.api.connections import visible_connections
from roost.http.auth import check_vhost, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import BOOL, STR, TAGS, Route, obj
from roost.http.util import ADMINISTRATOR, MANAGEMENT, access, bad_request, created, read_json


@access(MANAGEMENT)
async def list_vhosts(request: web.Request) -> web.Response:
    b, me = management(request), user(request)
    found = b.queries.list_vhosts()
    return listing(request, [ser.vhost(v) for v in found if visible(b, me, v.name)])


@access(MANAGEMENT)
async def get_vhost(request: web.Request) -> web.Response:
    b, name = management(request), request.match_info["vhost"]
    check_vhost(b, user(request), name)
    return web.json_response(ser.vhost(b.queries.vhost_info(name)))


@access(ADMINISTRATOR)
async def put_vhost(request: web.Request) -> web.Response:
    body = await read_json(request)
    raw_metadata = body.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    made = management(request).definitions.put_vhost(
        request.match_info["vhost"],
        description=body.get("description", metadata.get("description")),
        tags=body.get("tags", metadata.get("tags")),
        # RabbitMQ 3.10's API and UI name it defaultqueuetype; later ones default_queue_type
        default_queue_type=body.get("default_queue_type", body.get("defaultqueuetype")),
        creator=user(request).name,
        tracing=_tracing(body),
    )
    return created(made)


def _tracing(body: dict[str, Any]) -> bool | None:
    """The firehose switch, as RabbitMQ's management API takes it."""
    value = body.get("tracing")
    if value is None or isinstance(value, bool):
        return value
    raise bad_request("tracing must be true or false")


@access(ADMINISTRATOR)
async def delete_vhost(request: web.Request) -> web.Response:
    management(request).definitions.delete_vhost(request.match_info["vhost"])
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def vhost_permissions(request: web.Request) -> web.Response:
    b, name = management(request), request.match_info["vhost"]
    b.queries.check_vhost(name)
    return listing(request, [ser.permission(p) for p in b.queries.list_permissions(vhost=name)])


@access(ADMINISTRATOR)
async def vhost_topic_permissions(request: web.Request) -> web.Response:
    b, name = management(request), request.match_info["vhost"]
    b.queries.check_vhost(name)
    found = b.queries.list_topic_permissions(vhost=name)
    return listing(request, [ser.topic_permission(p) for p in found])


@access(MANAGEMENT)
async def vhost_connections(request: web.Request) -> web.Response:
    name = request.match_info["vhost"]
    check_vhost(management(request), user(request), name)
    return listing(request, [ser.connection(c) for c in visible_connections(request, name)])


@access(MANAGEMENT)
async def vhost_channels(request: web.Request) -> web.Response:
    name = request.match_info["vhost"]
    check_vhost(management(request), user(request), name)
    return listing(request, [ser.channel(c) for c in visible_channels(request, name)])


VHOST_BODY = obj(
    {
        "description": STR,
        "tags": TAGS,
        "default_queue_type": STR,
        "defaultqueuetype": STR,
        "tracing": BOOL,
    }
)
ROUTES = [
    Route("GET", "/api/vhosts", list_vhosts, "Virtual hosts the user can see", listing=True),
    Route("GET", "/api/vhosts/{vhost}", get_vhost, "One virtual host"),
    Route(
        "PUT",
        "/api/vhosts/{vhost}",
        put_vhost,
        "Create a vhost or set its metadata",
        body=VHOST_BODY,
    ),
    Route("DELETE", "/api/vhosts/{vhost}", delete_vhost, "Delete a vhost and all it holds"),
    Route(
        "GET",
        "/api/vhosts/{vhost}/permissions",
        vhost_permissions,
        "Permissions in a vhost",
        listing=True,
    ),
    Route(
        "GET",
        "/api/vhosts/{vhost}/topic-permissions",
        vhost_topic_permissions,
        "Topic permissions in a vhost",
        listing=True,
    ),
    Route(
        "GET",
        "/api/vhosts/{vhost}/connections",
        vhost_connections,
        "Open connections to a vhost",
        listing=True,
    ),
    Route(
        "GET",
        "/api/vhosts/{vhost}/channels",
        vhost_channels,
        "Open channels in a vhost",
        listing=True,
    ),
]
