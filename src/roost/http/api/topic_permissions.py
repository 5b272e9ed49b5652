"""/api/topic-permissions: list, get, put and delete; enforced on publish and bind."""

from __future__ import annotations

from aiohttp import web

from roost.http import serialize as ser
from roost.http.keys import management
from roost.http.listing import listing
from roost.http.routes import STR, Route, obj
from roost.http.util import ADMINISTRATOR, access, bad_request, created, not_found, read_json

FIELDS = ("exchange", "write", "read")


@access(ADMINISTRATOR)
async def list_all(request: web.Request) -> web.Response:
    found = management(request).queries.list_topic_permissions()
    return listing(request, [ser.topic_permission(p) for p in found])


@access(ADMINISTRATOR)
async def get_one(request: web.Request) -> web.Response:
    m, b = request.match_info, management(request)
    b.queries.check_vhost(m["vhost"])
    b.queries.user_info(m["user"])
    found = b.queries.list_topic_permissions(user=m["user"], vhost=m["vhost"])
    if not found:
        raise not_found(f"no topic permissions for user '{m['user']}' in vhost '{m['vhost']}'")
    return web.json_response([ser.topic_permission(p) for p in found])


@access(ADMINISTRATOR)
async def put_one(request: web.Request) -> web.Response:
    body, m = await read_json(request), request.match_info
    missing = [k for k in FIELDS if k not in body]
    if missing:
        raise bad_request(f"{', '.join(missing)} missing")
    made = management(request).definitions.put_topic_permission(
        m["user"], m["vhost"], exchange=body["exchange"], write=body["write"], read=body["read"]
    )
    return created(made)


@access(ADMINISTRATOR)
async def delete_one(request: web.Request) -> web.Response:
    m = request.match_info
    management(request).definitions.delete_topic_permission(
        m["user"], m["vhost"], request.query.get("exchange")
    )
    return web.Response(status=204)


T = "/api/topic-permissions/{vhost}/{user}"
ROUTES = [
    Route("GET", "/api/topic-permissions", list_all, "Every topic permission", listing=True),
    Route("GET", T, get_one, "A user's topic permissions in a vhost"),
    Route(
        "PUT",
        T,
        put_one,
        "Set a user's topic permission for one exchange",
        body=obj({k: STR for k in FIELDS}, FIELDS),
    ),
    Route(
        "DELETE", T, delete_one, "Clear a user's topic permissions in a vhost", query=("exchange",)
    ),
]
