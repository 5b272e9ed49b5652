"""/api/exchanges: list (all, per vhost), get, PUT declare, DELETE, publish, bindings.

The default exchange is called ``amq.default`` in paths, as in RabbitMQ.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from aiohttp import web

from roost.core import Message, Properties
from roost.http import serialize as ser
from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import BOOL, MAP, STR, Route, obj
from roost.http.util import (
    MANAGEMENT,
    access,
    bad_request,
    created,
    get_bool,
    get_dict,
    get_str,
    query_bool,
    read_json,
)

DEFAULT = "amq.default"
STRING_PROPERTIES = (
    "content_type",
    "content_encoding",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
)
INT_PROPERTIES = ("delivery_mode", "priority", "timestamp")


def path_name(request: web.Request) -> str:
    name = request.match_info["name"]
    return "" if name == DEFAULT else name


def parse_properties(raw: Any) -> Properties:
    """The publish body's ``properties``: RabbitMQ's names, checked for type."""
    if raw is None or raw == []:  # RabbitMQ itself writes an empty object as []
        return Properties()
    if not isinstance(raw, dict):
        raise bad_request("properties must be an object")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in STRING_PROPERTIES:
            if not isinstance(value, str):
                raise bad_request(f"property {key} must be a string")
            values[key] = value
        elif key in INT_PROPERTIES:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise bad_request(f"property {key} must be a non-negative integer")
            values[key] = value
        elif key == "headers":
            if not isinstance(value, dict):
                raise bad_request("property headers must be an object")
            values[key] = value
        else:
            raise bad_request(f"unknown message property '{key}'")
    if values.get("delivery_mode", 1) not in (1, 2):
        raise bad_request("delivery_mode must be 1 or 2")
    if values.get("priority", 0) > 255:
        raise bad_request("priority must be at most 255")
    return Properties(**values)


def parse_payload(body: dict[str, Any]) -> bytes:
    payload = get_str(body, "payload")
    encoding = get_str(body, "payload_encoding", "string")
    if encoding == "string":
        return payload.encode("utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request("payload is not valid base64") from None
    raise bad_request("payload_encoding must be string or base64")


@access(MANAGEMENT)
async def list_exchanges(request: web.Request) -> web.Response:
    b, me = management(request), user(request)
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    return listing(
        request,
        [ser.exchange(x) for x in b.queries.list_exchanges(vhost) if visible(b, me, x.vhost)],
    )


@access(MANAGEMENT)
async def get_exchange(request: web.Request) -> web.Response:
    b, vhost = management(request), request.match_info["vhost"]
    check_vhost(b, user(request), vhost)
    return web.json_response(ser.exchange(b.queries.exchange_info(vhost, path_name(request))))


@access(MANAGEMENT)
async def put_exchange(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    body = await read_json(request)
    made = b.operations.mgmt_declare_exchange(
        me.name,
        vhost,
        request.match_info["name"],
        get_str(body, "type", "direct"),
        durable=get_bool(body, "durable", True),
        auto_delete=get_bool(body, "auto_delete", False),
        internal=get_bool(body, "internal", False),
        arguments=get_dict(body, "arguments"),
    )
    return created(made)


@access(MANAGEMENT)
async def delete_exchange(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    b.operations.mgmt_delete_exchange(
        me.name, vhost, request.match_info["name"], if_unused=query_bool(request, "if-unused")
    )
    return web.Response(status=204)


@access(MANAGEMENT)
async def publish(request: web.Request) -> web.Response:
    b, me, vhost = management(request), user(request), request.match_info["vhost"]
    check_vhost_write(b, me, vhost)
    body = await read_json(request)
    for key in ("routing_key", "payload", "payload_encoding", "properties"):
        if key not in body:
            raise bad_request(f"{key} is missing")
    name = path_name(request)
    message = Message(
        name,
        get_str(body, "routing_key"),
        parse_properties(body.get("properties")),
        parse_payload(body),
    )
    return web.json_response({"routed": b.operations.mgmt_publish(me.name, vhost, name, message)})


@access(MANAGEMENT)
async def bindings_source(request: web.Request) -> web.Response:
    b, vhost = management(request), request.match_info["vhost"]
    check_vhost(b, user(request), vhost)
    found = b.queries.list_bindings(vhost, source=path_name(request))
    return listing(request, [ser.binding(x) for x in found])


@access(MANAGEMENT)
async def bindings_destination(request: web.Request) -> web.Response:
    b, vhost = management(request), request.match_info["vhost"]
    check_vhost(b, user(request), vhost)
    found = b.queries.list_bindings(
        vhost, destination=path_name(request), destination_type="exchange"
    )
    return listing(request, [ser.binding(x) for x in found])


EXCHANGE_BODY = obj(
    {"type": STR, "durable": BOOL, "auto_delete": BOOL, "internal": BOOL, "arguments": MAP}
)
PUBLISH_BODY = obj(
    {"routing_key": STR, "payload": STR, "payload_encoding": STR, "properties": MAP},
    ("routing_key", "payload", "payload_encoding", "properties"),
)
X = "/api/exchanges/{vhost}/{name}"
ROUTES = [
    Route("GET", "/api/exchanges", list_exchanges, "Every exchange", listing=True),
    Route("GET", "/api/exchanges/{vhost}", list_exchanges, "A vhost's exchanges", listing=True),
    Route("GET", X, get_exchange, "One exchange"),
    Route("PUT", X, put_exchange, "Declare an exchange", body=EXCHANGE_BODY),
    Route("DELETE", X, delete_exchange, "Delete an exchange", query=("if-unused",)),
    Route("POST", X + "/publish", publish, "Publish a message", body=PUBLISH_BODY),
    Route(
        "GET", X + "/bindings/source", bindings_source, "Bindings from an exchange", listing=True
    ),
    Route(
        "GET",
        X + "/bindings/destination",
        bindings_destination,
        "Bindings to an exchange",
        listing=True,
    ),
]
