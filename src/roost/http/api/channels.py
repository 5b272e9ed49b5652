"""/api/channels: every open channel (session), and one by name."""

from __future__ import annotations

from aiohttp import web

from roost.core.info import ChannelInfo
from roost.http import serialize as ser
from roost.http.auth import sees_everything
from roost.http.cluster import gather
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.util import MANAGEMENT, access, not_found


def visible_channels(request: web.Request, vhost: str | None = None) -> list[ChannelInfo]:
    me = user(request)
    found = management(request).activity.list_channels(vhost)
    return found if sees_everything(me) else [c for c in found if c.user == me.name]


@access(MANAGEMENT)
async def list_channels(request: web.Request) -> web.Response:
    own = [ser.channel(c) for c in visible_channels(request)]
    return listing(request, await gather(request, own))


@access(MANAGEMENT)
async def get_channel(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    for c in visible_channels(request):
        if c.name == name:
            return web.json_response(ser.channel(c))
    raise not_found(f"no channel '{name}'")


ROUTES = [
    Route("GET", "/api/channels", list_channels, "Open channels", listing=True),
    Route("GET", "/api/channels/{name}", get_channel, "One channel"),
]
