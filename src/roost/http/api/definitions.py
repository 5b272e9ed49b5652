"""/api/definitions: export (GET) and import (POST) in RabbitMQ's format, whole broker or
one vhost. The import answers 400 with the reason when the document is malformed or
refers to something that does not exist."""

from __future__ import annotations

import json

from aiohttp import web

from roost.core.errors import NotFound
from roost.http.keys import management, user
from roost.http.routes import MAP, Route
from roost.http.util import ADMINISTRATOR, access, bad_request, query_bool


def _export(request: web.Request, vhost: str | None) -> web.Response:
    body = management(request).export_definitions(vhost)
    headers = {}
    if query_bool(request, "download") or "download" in request.query:
        name = request.query.get("download") or "roost-definitions.json"
        if name.lower() in ("true", ""):
            name = "roost-definitions.json"
        safe = "".join(ch for ch in name if ch.isalnum() or ch in "._-") or "definitions.json"
        headers["Content-Disposition"] = f'attachment; filename="{safe}"'
    return web.json_response(body, headers=headers, dumps=lambda o: json.dumps(o, indent=2))


async def _import(request: web.Request, vhost: str | None) -> web.Response:
    raw = await request.read()
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise bad_request("not_json") from None
    try:
        report = management(request).import_definitions(data, vhost, creator=user(request).name)
    except NotFound as exc:
        if vhost is not None and exc.text == f"no vhost '{vhost}'":
            raise
        raise bad_request(exc.text) from None  # a reference inside the document
    if request.query.get("report") == "true":  # a Roost addition: what was imported
        return web.json_response({"imported": report.counts})
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def export_all(request: web.Request) -> web.Response:
    return _export(request, None)


@access(ADMINISTRATOR)
async def import_all(request: web.Request) -> web.Response:
    return await _import(request, None)


@access(ADMINISTRATOR)
async def export_vhost(request: web.Request) -> web.Response:
    return _export(request, request.match_info["vhost"])


@access(ADMINISTRATOR)
async def import_vhost(request: web.Request) -> web.Response:
    return await _import(request, request.match_info["vhost"])


ROUTES = [
    Route("GET", "/api/definitions", export_all, "Export every definition", query=("download",)),
    Route(
        "POST",
        "/api/definitions",
        import_all,
        "Import definitions (additive)",
        body=MAP,
        query=("report",),
    ),
    Route(
        "GET",
        "/api/definitions/{vhost}",
        export_vhost,
        "Export one vhost's definitions",
        query=("download",),
    ),
    Route(
        "POST",
        "/api/definitions/{vhost}",
        import_vhost,
        "Import definitions into one vhost",
        body=MAP,
        query=("report",),
    ),
]
