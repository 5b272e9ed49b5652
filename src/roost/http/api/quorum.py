"""A replicated quorum queue's or stream's members, shaped like RabbitMQ's (3.13 and
later) HTTP API for ``rabbitmq-queues add_member | delete_member | grow | shrink``:

- ``POST /api/queues/quorum/{vhost}/{name}/replicas/add`` ``{"node": N}``
- ``DELETE /api/queues/quorum/{vhost}/{name}/replicas/delete`` ``{"node": N}``
- ``POST /api/queues/quorum/replicas/on/{node}/grow``
  ``{"strategy": "all"|"even", "vhost_pattern": RE, "queue_pattern": RE}``
- ``DELETE /api/queues/quorum/replicas/on/{node}/shrink``

Any node answers: the change is done by the queue's leader (``roost.cluster.quorum``),
and the answer comes once it is applied. Without ``--cluster`` every call answers 400.
"""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from roost.http.routes import STR, Route, obj
from roost.http.util import ADMINISTRATOR, access, bad_request, get_str, read_json


class QuorumMembers(Protocol):
    """What roost.cluster's quorum manager offers (``MemberControl``)."""

    async def add_member(self, vhost: str, queue: str, node: str) -> list[str]: ...

    async def delete_member(
        self, vhost: str, queue: str, node: str, *, keep_target: bool = False
    ) -> list[str]: ...

    async def grow(
        self, node: str, *, strategy: str = ..., vhost_pattern: str = ..., queue_pattern: str = ...
    ) -> list[dict[str, Any]]: ...

    async def shrink(self, node: str) -> list[dict[str, Any]]: ...


MEMBERS = web.AppKey("quorum_members", QuorumMembers)


def _control(request: web.Request) -> QuorumMembers:
    control = request.app.get(MEMBERS)
    if control is None:
        raise bad_request("quorum queue members can be changed on a cluster only")
    return control


async def _node(request: web.Request) -> str:
    body = await read_json(request)
    return get_str(body, "node")


@access(ADMINISTRATOR)
async def add_member(request: web.Request) -> web.Response:
    vhost, name = request.match_info["vhost"], request.match_info["name"]
    members = await _control(request).add_member(vhost, name, await _node(request))
    return web.json_response({"members": members}, status=201)


@access(ADMINISTRATOR)
async def delete_member(request: web.Request) -> web.Response:
    vhost, name = request.match_info["vhost"], request.match_info["name"]
    members = await _control(request).delete_member(vhost, name, await _node(request))
    return web.json_response({"members": members})


@access(ADMINISTRATOR)
async def grow(request: web.Request) -> web.Response:
    body = await read_json(request) if request.can_read_body else {}
    strategy = get_str(body, "strategy", "all")
    if strategy not in ("all", "even"):
        raise bad_request("strategy must be all or even")
    done = await _control(request).grow(
        request.match_info["node"],
        strategy=strategy,
        vhost_pattern=get_str(body, "vhost_pattern", ".*"),
        queue_pattern=get_str(body, "queue_pattern", ".*"),
    )
    return web.json_response(done)


@access(ADMINISTRATOR)
async def shrink(request: web.Request) -> web.Response:
    return web.json_response(await _control(request).shrink(request.match_info["node"]))


QQ = "/api/queues/quorum/{vhost}/{name}/replicas"
ON = "/api/queues/quorum/replicas/on/{node}"
NODE_BODY = obj({"node": STR}, ("node",))
GROW_BODY = obj({"strategy": STR, "vhost_pattern": STR, "queue_pattern": STR})

ROUTES = [
    Route("POST", QQ + "/add", add_member, "Add a member to a quorum queue", body=NODE_BODY),
    Route(
        "DELETE", QQ + "/delete", delete_member, "Remove a quorum queue's member", body=NODE_BODY
    ),
    Route(
        "POST", ON + "/grow", grow, "Add a node to quorum queue and stream groups", body=GROW_BODY
    ),
    Route("DELETE", ON + "/shrink", shrink, "Move a node's quorum queue and stream members off it"),
]
