"""/api/parameters, /api/global-parameters and /api/operator-policies, as RabbitMQ 3.10
shapes them: runtime parameters per component and vhost (vhost limits, operator
policies, shovels and federation upstreams), global parameters, and operator policies,
which cap what users' policies may set (core/parameters.py)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.core.info import GlobalParameterInfo, ParameterInfo
from roost.http import serialize as ser
from roost.http.api.policies import policy_body
from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import INT, MAP, STR, Route, obj
from roost.http.util import ADMINISTRATOR, POLICYMAKER, access, bad_request, created, read_json


def parameter(p: ParameterInfo) -> dict[str, Any]:
    return {"value": p.value, "vhost": p.vhost, "component": p.component, "name": p.name}


def global_parameter(g: GlobalParameterInfo) -> dict[str, Any]:
    return {"name": g.name, "value": g.value}


@access(POLICYMAKER)
async def list_parameters(request: web.Request) -> web.Response:
    b, me, m = management(request), user(request), request.match_info
    vhost = m.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    rows = b.parameters.list_parameters(vhost, m.get("component"))
    return listing(request, [parameter(p) for p in rows if visible(b, me, p.vhost)])


@access(POLICYMAKER)
async def get_parameter(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost(b, user(request), m["vhost"])
    found = b.parameters.parameter_info(m["vhost"], m["component"], m["name"])
    return web.json_response(parameter(found))


@access(POLICYMAKER)
async def put_parameter(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    body = await read_json(request)
    if "value" not in body:
        raise bad_request("value missing")
    return created(b.parameters.put_parameter(m["vhost"], m["component"], m["name"], body["value"]))


@access(POLICYMAKER)
async def delete_parameter(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    b.parameters.delete_parameter(m["vhost"], m["component"], m["name"])
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def list_global(request: web.Request) -> web.Response:
    rows = management(request).parameters.list_global_parameters()
    return listing(request, [global_parameter(g) for g in rows])


@access(ADMINISTRATOR)
async def get_global(request: web.Request) -> web.Response:
    found = management(request).parameters.global_parameter_info(request.match_info["name"])
    return web.json_response(global_parameter(found))


@access(ADMINISTRATOR)
async def put_global(request: web.Request) -> web.Response:
    body = await read_json(request)
    if "value" not in body:
        raise bad_request("value missing")
    name = request.match_info["name"]
    return created(management(request).parameters.put_global_parameter(name, body["value"]))


@access(ADMINISTRATOR)
async def delete_global(request: web.Request) -> web.Response:
    management(request).parameters.delete_global_parameter(request.match_info["name"])
    return web.Response(status=204)


@access(ADMINISTRATOR)
async def list_operator_policies(request: web.Request) -> web.Response:
    b, vhost = management(request), request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, user(request), vhost)
    return listing(request, [ser.policy(p) for p in b.parameters.list_operator_policies(vhost)])


@access(ADMINISTRATOR)
async def get_operator_policy(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost(b, user(request), m["vhost"])
    return web.json_response(ser.policy(b.parameters.operator_policy_info(m["vhost"], m["name"])))


@access(ADMINISTRATOR)
async def put_operator_policy(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    made = b.parameters.put_operator_policy(m["vhost"], m["name"], **await policy_body(request))
    return created(made)


@access(ADMINISTRATOR)
async def delete_operator_policy(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    b.parameters.delete_operator_policy(m["vhost"], m["name"])
    return web.Response(status=204)


VALUE_BODY = obj({"value": {}, "vhost": STR, "component": STR, "name": STR}, ("value",))
POLICY_BODY = obj(
    {"pattern": STR, "definition": MAP, "priority": INT, "apply-to": STR},
    ("pattern", "definition"),
)
P = "/api/parameters/{component}/{vhost}/{name}"
G = "/api/global-parameters/{name}"
OP = "/api/operator-policies/{vhost}/{name}"
ROUTES = [
    Route("GET", "/api/parameters", list_parameters, "Every runtime parameter", listing=True),
    Route(
        "GET",
        "/api/parameters/{component}",
        list_parameters,
        "One component's parameters",
        listing=True,
    ),
    Route(
        "GET",
        "/api/parameters/{component}/{vhost}",
        list_parameters,
        "One component's parameters in a vhost",
        listing=True,
    ),
    Route("GET", P, get_parameter, "One runtime parameter"),
    Route("PUT", P, put_parameter, "Set a runtime parameter", body=VALUE_BODY),
    Route("DELETE", P, delete_parameter, "Clear a runtime parameter"),
    Route("GET", "/api/global-parameters", list_global, "Every global parameter", listing=True),
    Route("GET", G, get_global, "One global parameter"),
    Route("PUT", G, put_global, "Set a global parameter", body=VALUE_BODY),
    Route("DELETE", G, delete_global, "Clear a global parameter"),
    Route(
        "GET",
        "/api/operator-policies",
        list_operator_policies,
        "Every operator policy",
        listing=True,
    ),
    Route(
        "GET",
        "/api/operator-policies/{vhost}",
        list_operator_policies,
        "A vhost's operator policies",
        listing=True,
    ),
    Route("GET", OP, get_operator_policy, "One operator policy"),
    Route("PUT", OP, put_operator_policy, "Create or replace an operator policy", body=POLICY_BODY),
    Route("DELETE", OP, delete_operator_policy, "Delete an operator policy"),
]
