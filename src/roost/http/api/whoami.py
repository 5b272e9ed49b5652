"""GET /api/whoami: the signed-in user and its tags."""

from __future__ import annotations

from aiohttp import web

from roost.http.keys import user
from roost.http.routes import Route
from roost.http.util import MANAGEMENT, access


@access(MANAGEMENT)
async def whoami(request: web.Request) -> web.Response:
    me = user(request)
    return web.json_response({"name": me.name, "tags": list(me.tags)})


ROUTES = [Route("GET", "/api/whoami", whoami, "The signed-in user and its tags")]
