"""/api/shovels, as RabbitMQ 3.10's shovel management plugin shapes it: the status of
each dynamic shovel (roost.shovel, through the management port's parameter runtime),
and restarting one."""

from __future__ import annotations

from aiohttp import web

from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.util import MONITORING, POLICYMAKER, access

COMPONENT = "shovel"


@access(MONITORING)
async def list_shovels(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    rows = b.parameters.runtime_status(COMPONENT, vhost)
    return listing(request, [r for r in rows if visible(b, me, r["vhost"])])


@access(POLICYMAKER)
async def restart_shovel(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    b.parameters.runtime_restart(COMPONENT, m["vhost"], m["name"])
    return web.Response(status=204)


ROUTES = [
    Route("GET", "/api/shovels", list_shovels, "Every dynamic shovel's status", listing=True),
    Route("GET", "/api/shovels/{vhost}", list_shovels, "A vhost's shovels", listing=True),
    Route(
        "DELETE",
        "/api/shovels/vhost/{vhost}/{name}/restart",
        restart_shovel,
        "Restart a dynamic shovel",
    ),
]
