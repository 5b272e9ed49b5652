"""The two handlers a parameter component with a runtime has in RabbitMQ's management
plugins (`/api/shovels`, `/api/federation-links`): list its runtime's status rows, and
restart one. Each API module names its component and the URL key of its restart."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.util import MONITORING, POLICYMAKER, access

Handler = Callable[[web.Request], Awaitable[web.Response]]


def status_handler(component: str) -> Handler:
    @access(MONITORING)
    async def list_status(request: web.Request) -> web.Response:
        b, me, vhost = management(request), user(request), request.match_info.get("vhost")
        if vhost is not None:
            check_vhost(b, me, vhost)
        rows = b.parameters.runtime_status(component, vhost)
        return listing(request, [r for r in rows if visible(b, me, r["vhost"])])

    return list_status


def restart_handler(component: str, key: str) -> Handler:
    @access(POLICYMAKER)
    async def restart(request: web.Request) -> web.Response:
        b, m = management(request), request.match_info
        check_vhost_write(b, user(request), m["vhost"])
        b.parameters.runtime_restart(component, m["vhost"], m[key])
        return web.Response(status=204)

    return restart
