"""/api/users: list, get, PUT (password or password_hash, tags), DELETE, bulk delete,
users without permissions, a user's permissions and topic permissions."""

from __future__ import annotations

from aiohttp import web

from roost.http import serialize as ser
from roost.http.keys import management
from roost.http.listing import listing
from roost.http.routes import STR, TAGS, Route, obj
from roost.http.util import ADMINISTRATOR, access, bad_request, created, read_json


@access(ADMINISTRATOR)
async def list_users(request: web.Request) -> web.Response:
    return listing(request, [ser.user(u) for u in management(request).queries.list_users()])


@access(ADMINISTRATOR)
async def without_permissions(request: web.Request) -> web.Response:
    b = management(request)
    holders = {p.user for p in b.queries.list_permissions()}
    return listing(request, [ser.user(u) for u in b.queries.list_users() if u.name not in holders])


@access(ADMINISTRATOR)
async def get_user(request: web.Request) -> web.Response:
    found = management(request).queries.user_info(request.match_info["name"])
    return web.json_response(ser.user(found))


@access(ADMINISTRATOR)
async def put_user(request: web.Request) -> web.Response:
    body = await read_json(request)
    if "password" in body and "password_hash" in body:
        raise bad_request("give either password or password_hash, not both")
    made = management(request).definitions.put_user(
        request.match_info["name"],
        password=body.get("password"),
        password_hash=body.get("password_hash"),
        hashing_algorithm=body.get("hashing_algorithm"),
        tags=body.get("tags"),
    )
    return created(made)


@access(ADMINISTRATOR)
async def delete_user(request: web.Request) -> web.Response:
    management(request).definitions.delete_user(request.match_info["name"])
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def bulk_delete(request: web.Request) -> web.Response:
    body = await read_json(request)
    names = body.get("users")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise bad_request("users must be a list of user names")
    b = management(request)
    for name in names:
        if name in {u.name for u in b.queries.list_users()}:
            b.definitions.delete_user(name)
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def user_permissions(request: web.Request) -> web.Response:
    b, name = management(request), request.match_info["name"]
    b.queries.user_info(name)
    return listing(request, [ser.permission(p) for p in b.queries.list_permissions(user=name)])


@access(ADMINISTRATOR)
async def user_topic_permissions(request: web.Request) -> web.Response:
    b, name = management(request), request.match_info["name"]
    b.queries.user_info(name)
    found = b.queries.list_topic_permissions(user=name)
    return listing(request, [ser.topic_permission(p) for p in found])


USER_BODY = obj({"password": STR, "password_hash": STR, "hashing_algorithm": STR, "tags": TAGS})
U = "/api/users/{name}"
ROUTES = [
    Route("GET", "/api/users", list_users, "Every user", listing=True),
    Route(
        "GET",
        "/api/users/without-permissions",
        without_permissions,
        "Users with no permissions anywhere",
        listing=True,
    ),
    Route(
        "POST",
        "/api/users/bulk-delete",
        bulk_delete,
        "Delete several users",
        body=obj({"users": {"type": "array", "items": STR}}, ("users",)),
    ),
    Route("GET", U, get_user, "One user"),
    Route("PUT", U, put_user, "Create or update a user", body=USER_BODY),
    Route("DELETE", U, delete_user, "Delete a user (its connections are closed)"),
    Route("GET", U + "/permissions", user_permissions, "A user's permissions", listing=True),
    Route(
        "GET",
        U + "/topic-permissions",
        user_topic_permissions,
        "A user's topic permissions",
        listing=True,
    ),
]
