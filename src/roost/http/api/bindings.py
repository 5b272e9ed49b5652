"""/api/bindings: all, per vhost, between an exchange and a queue or exchange; POST to
bind, DELETE by properties key."""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from roost.http import serialize as ser
from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import MAP, STR, Route, obj
from roost.http.util import MANAGEMENT, access, get_dict, get_str, read_json

KINDS = {"q": "queue", "e": "exchange"}


def _ends(request: web.Request) -> tuple[str, str, str, str]:
    m = request.match_info
    source = "" if m["source"] == "amq.default" else m["source"]
    return m["vhost"], source, KINDS[m["kind"]], m["destination"]


@access(MANAGEMENT)
async def list_bindings(request: web.Request) -> web.Response:
    b, me = management(request), user(request)
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    return listing(
        request, [ser.binding(x) for x in b.queries.list_bindings(vhost) if visible(b, me, x.vhost)]
    )


@access(MANAGEMENT)
async def between(request: web.Request) -> web.Response:
    vhost, source, kind, destination = _ends(request)
    b = management(request)
    check_vhost(b, user(request), vhost)
    found = b.queries.list_bindings(
        vhost, source=source, destination=destination, destination_type=kind
    )
    return listing(request, [ser.binding(x) for x in found])


@access(MANAGEMENT)
async def bind(request: web.Request) -> web.Response:
    vhost, source, kind, destination = _ends(request)
    b, me = management(request), user(request)
    check_vhost_write(b, me, vhost)
    body = await read_json(request)
    key = b.operations.mgmt_bind(
        me.name,
        vhost,
        source,
        kind,
        destination,
        get_str(body, "routing_key", ""),
        get_dict(body, "arguments"),
    )
    # RabbitMQ answers with the new binding's path relative to this one
    location = f"{quote(destination, safe='')}/{quote(key, safe='')}"
    return web.Response(status=201, headers={"Location": location})


@access(MANAGEMENT)
async def get_binding(request: web.Request) -> web.Response:
    vhost, source, kind, destination = _ends(request)
    b = management(request)
    check_vhost(b, user(request), vhost)
    info = b.queries.binding_info(vhost, source, kind, destination, request.match_info["props"])
    return web.json_response(ser.binding(info))


@access(MANAGEMENT)
async def unbind(request: web.Request) -> web.Response:
    vhost, source, kind, destination = _ends(request)
    b, me = management(request), user(request)
    check_vhost_write(b, me, vhost)
    b.operations.mgmt_unbind(me.name, vhost, source, kind, destination, request.match_info["props"])
    return web.Response(status=204)


BIND_BODY = obj({"routing_key": STR, "arguments": MAP})
ROUTES = [
    Route("GET", "/api/bindings", list_bindings, "Every binding", listing=True),
    Route("GET", "/api/bindings/{vhost}", list_bindings, "A vhost's bindings", listing=True),
]
for kind, what in (("q", "queue"), ("e", "exchange")):
    base = f"/api/bindings/{{vhost}}/e/{{source}}/{{kind:{kind}}}/{{destination}}"
    ROUTES += [
        Route("GET", base, between, f"Bindings from an exchange to a {what}", listing=True),
        Route("POST", base, bind, f"Bind an exchange to a {what}", body=BIND_BODY),
        Route("GET", base + "/{props}", get_binding, f"One exchange-to-{what} binding"),
        Route("DELETE", base + "/{props}", unbind, f"Delete an exchange-to-{what} binding"),
    ]
