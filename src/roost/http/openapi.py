"""``/api/openapi.json``: an OpenAPI 3.0 document built from the route table, so it
cannot drift from what the server actually routes."""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from roost import __version__
from roost.http.listing import LISTING_PARAMS
from roost.http.routes import Route
from roost.http.util import Handler

PARAM = re.compile(r"\{(\w+)(?::([^}]+))?\}")
ERROR = {
    "type": "object",
    "properties": {"error": {"type": "string"}, "reason": {"type": "string"}},
}
LISTING_SCHEMAS = {
    "page": {"type": "integer", "minimum": 1},
    "page_size": {"type": "integer", "minimum": 1, "maximum": 500},
    "name": {"type": "string"},
    "use_regex": {"type": "boolean"},
    "sort": {"type": "string"},
    "sort_reverse": {"type": "boolean"},
    "columns": {"type": "string"},
}


def _path(route: Route) -> tuple[str, list[str]]:
    """aiohttp's ``{kind:q}`` (a fixed segment) becomes the literal ``q``."""
    names: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(2) is not None and re.fullmatch(r"\w+", m.group(2)):
            return m.group(2)
        names.append(m.group(1))
        return "{" + m.group(1) + "}"

    return PARAM.sub(sub, route.path), names


def _operation(route: Route, path: str, names: list[str]) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for n in names
    ]
    if route.listing:
        params += [
            {"name": n, "in": "query", "required": False, "schema": LISTING_SCHEMAS[n]}
            for n in LISTING_PARAMS
        ]
    params += [
        {"name": n, "in": "query", "required": False, "schema": {"type": "string"}}
        for n in route.query
    ]
    responses: dict[str, Any] = {
        "401": {"description": "missing or wrong credentials"},
        "403": {"description": "the user lacks the tag or permission"},
        "400": {
            "description": "bad request",
            "content": {"application/json": {"schema": ERROR}},
        },
        "404": {"description": "no such object"},
    }
    if route.method == "GET":
        responses["200"] = {"description": "OK", "content": {"application/json": {}}}
    else:
        responses["201"] = {"description": "created"}
        responses["204"] = {"description": "done"}
        responses["200"] = {"description": "OK", "content": {"application/json": {}}}
    op: dict[str, Any] = {
        "summary": route.summary,
        "operationId": route.method.lower() + re.sub(r"\W+", "_", path).rstrip("_"),
        "parameters": params,
        "responses": responses,
        "security": [{"basic": []}],
    }
    if route.body is not None:
        op["requestBody"] = {
            "required": route.method != "PUT",
            "content": {"application/json": {"schema": route.body}},
        }
    return op


def document(routes: list[Route]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        path, names = _path(route)
        op = _operation(route, path, names)
        paths.setdefault(path, {})[route.method.lower()] = op
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Roost management API",
            "version": __version__,
            "description": "RabbitMQ-compatible management HTTP API (paths and JSON shapes of "
            "RabbitMQ 3.10's /api). The vhost '/' is written %2F in paths.",
        },
        "components": {"securitySchemes": {"basic": {"type": "http", "scheme": "basic"}}},
        "paths": paths,
    }


def handler(routes: list[Route]) -> Handler:
    doc = document(routes)

    async def openapi_json(request: web.Request) -> web.Response:
        return web.json_response(doc)

    return openapi_json
