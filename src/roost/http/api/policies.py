"""/api/policies: list (all, per vhost), GET / PUT / DELETE one. Stored and matched to
queues and exchanges (``policy`` in their JSON); the queue features apply them."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.http import serialize as ser
from roost.http.auth import check_vhost, check_vhost_write, visible
from roost.http.keys import management, user
from roost.http.listing import listing
from roost.http.routes import INT, MAP, STR, Route, obj
from roost.http.util import POLICYMAKER, access, bad_request, created, read_json


@access(POLICYMAKER)
async def list_policies(request: web.Request) -> web.Response:
    b, me = management(request), user(request)
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        check_vhost(b, me, vhost)
    return listing(
        request, [ser.policy(p) for p in b.queries.list_policies(vhost) if visible(b, me, p.vhost)]
    )


@access(POLICYMAKER)
async def get_policy(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost(b, user(request), m["vhost"])
    return web.json_response(ser.policy(b.queries.policy_info(m["vhost"], m["name"])))


@access(POLICYMAKER)
async def put_policy(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    made = b.definitions.put_policy(m["vhost"], m["name"], **await policy_body(request))
    return created(made)


async def policy_body(request: web.Request) -> dict[str, Any]:
    """A PUT's policy (a user's or an operator's), as the keywords of ``put_policy``."""
    body = await read_json(request)
    missing = [k for k in ("pattern", "definition") if k not in body]
    if missing:
        raise bad_request(f"{', '.join(missing)} missing")
    return {
        "pattern": body["pattern"],
        "definition": body["definition"],
        "priority": body.get("priority", 0),
        "apply_to": body.get("apply-to", "all"),
    }


@access(POLICYMAKER)
async def delete_policy(request: web.Request) -> web.Response:
    b, m = management(request), request.match_info
    check_vhost_write(b, user(request), m["vhost"])
    b.definitions.delete_policy(m["vhost"], m["name"])
    return web.Response(status=204)


POLICY_BODY = obj(
    {"pattern": STR, "definition": MAP, "priority": INT, "apply-to": STR},
    ("pattern", "definition"),
)
P = "/api/policies/{vhost}/{name}"
ROUTES = [
    Route("GET", "/api/policies", list_policies, "Every policy", listing=True),
    Route("GET", "/api/policies/{vhost}", list_policies, "A vhost's policies", listing=True),
    Route("GET", P, get_policy, "One policy"),
    Route("PUT", P, put_policy, "Create or replace a policy", body=POLICY_BODY),
    Route("DELETE", P, delete_policy, "Delete a policy"),
]
