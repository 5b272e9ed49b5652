"""/api/federation-links, as RabbitMQ 3.10's federation management plugin shapes it:
each link's status (roost.federation, through the management port's parameter
runtime), and restarting one by its id."""

from __future__ import annotations

from aiohttp import web

from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.util import MONITORING, POLICYMAKER, access

COMPONENT = "federation-upstream"


@access(MONITORING)
async def list_links(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    rows = b.parameters.runtime_status(COMPONENT, vhost)
    return listing(request, [r for r in rows if visible(b, me, r["vhost"])])


@access(POLICYMAKER)
async def restart_link(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    b.parameters.runtime_restart(COMPONENT, m["vhost"], m["id"])
    return web.Response(status=204)


ROUTES = [
    Route(
        "GET", "/api/federation-links", list_links, "Every federation link's status", listing=True
    ),
    Route(
        "GET",
        "/api/federation-links/{vhost}",
        list_links,
        "A vhost's federation links",
        listing=True,
    ),
    Route(
        "DELETE",
        "/api/federation-links/vhost/{vhost}/{id}/restart",
        restart_link,
        "Restart a federation link",
    ),
]
