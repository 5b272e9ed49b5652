"""/api/consumers: every consumer, or a vhost's."""

from __future__ import annotations

from aiohttp import web

from roost.http import serialize as ser
from roost.http.auth import check_vhost, visible
from roost.http.cluster import gather
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.util import MANAGEMENT, access


@access(MANAGEMENT)
async def list_consumers(request: web.Request) -> web.Response:
    b, me = management(request), user(request)
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    found = [c for c in b.activity.list_consumers(vhost) if visible(b, me, c.vhost)]
    return listing(request, await gather(request, [ser.consumer(c) for c in found]))


ROUTES = [
    Route("GET", "/api/consumers", list_consumers, "Every consumer", listing=True),
    Route("GET", "/api/consumers/{vhost}", list_consumers, "A vhost's consumers", listing=True),
]
