"""/api/permissions: every permission; GET / PUT / DELETE one user's in one vhost."""

from __future__ import annotations

from aiohttp import web

from roost.http import serialize as ser
from roost.http.keys import management
from roost.http.listing import listing
from roost.http.routes import STR, Route, obj
from roost.http.util import ADMINISTRATOR, access, bad_request, created, read_json

FIELDS = ("configure", "write", "read")


@access(ADMINISTRATOR)
async def list_permissions(request: web.Request) -> web.Response:
    found = management(request).queries.list_permissions()
    return listing(request, [ser.permission(p) for p in found])


@access(ADMINISTRATOR)
async def get_permission(request: web.Request) -> web.Response:
    m = request.match_info
    found = management(request).queries.permission_info(m["vhost"], m["user"])
    return web.json_response(ser.permission(found))


@access(ADMINISTRATOR)
async def put_permission(request: web.Request) -> web.Response:
    body, m = await read_json(request), request.match_info
    missing = [k for k in FIELDS if k not in body]
    if missing:
        raise bad_request(f"{', '.join(missing)} missing")
    made = management(request).definitions.put_permission(
        m["user"], m["vhost"], configure=body["configure"], write=body["write"], read=body["read"]
    )
    return created(made)


@access(ADMINISTRATOR)
async def delete_permission(request: web.Request) -> web.Response:
    m = request.match_info
    management(request).definitions.delete_permission(m["user"], m["vhost"])
    return web.Response(status=204)


P = "/api/permissions/{vhost}/{user}"
ROUTES = [
    Route("GET", "/api/permissions", list_permissions, "Every permission", listing=True),
    Route("GET", P, get_permission, "One user's permissions in a vhost"),
    Route(
        "PUT",
        P,
        put_permission,
        "Set a user's permissions in a vhost",
        body=obj({k: STR for k in FIELDS}, FIELDS),
    ),
    Route("DELETE", P, delete_permission, "Clear a user's permissions in a vhost"),
]
