"""A cluster's management view from any node, as RabbitMQ's API gives it.

Definitions are the same on every node, but a queue's figures live on its home node and
connections, channels and consumers on the node the client is connected to. A listing
asked of one node is therefore gathered: this node's own items, plus the same path asked
of every other running member's API (with the caller's credentials and ``LOCAL`` set, so
the member answers with its own items only). Every item says its ``node``. A member that
does not answer in ``TIMEOUT`` is left out; a queue whose home node is down is shown from
this node's definitions, with state ``down``.

A single node (no ``--cluster``) has no members and never asks anyone.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from aiohttp import web

from roost.core.info import MemberInfo
from roost.http import serialize
from roost.http.keys import management

log = logging.getLogger("roost.http.cluster")

LOCAL = "X-Roost-Node-Local"  # set on a member's request: answer with this node's items
TIMEOUT = 3.0
FORWARDED = ("Authorization", "Cookie")


def is_local(request: web.Request) -> bool:
    return request.headers.get(LOCAL) == "1"


def peers(request: web.Request) -> list[MemberInfo]:
    """The other running members to ask; none when this request is a member's own."""
    if is_local(request):
        return []
    activity = management(request).activity
    return [
        m
        for m in activity.cluster_members()
        if m.running and m.name != activity.node_name and m.http_port
    ]


def clustered(request: web.Request) -> bool:
    return bool(management(request).activity.cluster_members())


async def ask(request: web.Request, member: MemberInfo, path: str) -> Any:
    """``path`` of ``member``'s API as this request's caller; None when it fails."""
    headers = {h: request.headers[h] for h in FORWARDED if h in request.headers}
    headers[LOCAL] = "1"
    url = f"http://{member.host}:{member.http_port}{path}"
    try:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers=headers) as reply,
        ):
            if reply.status != 200:
                return None
            return await reply.json()
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        log.debug("management: node %s did not answer %s: %s", member.name, path, exc)
        return None


async def gather(
    request: web.Request, own: list[dict[str, Any]], path: str | None = None
) -> list[dict[str, Any]]:
    """This node's ``own`` items (each given its ``node``) and every other running
    member's answer to the same path (or ``path``)."""
    me = management(request).activity.node_name
    for item in own:
        item.setdefault("node", me)
    others = peers(request)
    if not others:
        return own
    path = path or request.rel_url.raw_path
    answers = await asyncio.gather(*(ask(request, m, path) for m in others))
    out = list(own)
    for member, answer in zip(others, answers, strict=True):
        for item in answer if isinstance(answer, list) else []:
            if isinstance(item, dict):
                item.setdefault("node", member.name)
                out.append(item)
    return out


async def gather_queues(
    request: web.Request, own: list[dict[str, Any]], path: str | None = None
) -> list[dict[str, Any]]:
    """Each queue as its home node shows it (its counts and rates are there); a queue
    whose home node did not answer is this node's view of it (state ``down``)."""
    me = management(request).activity.node_name
    if not clustered(request):
        return own
    home_here = [q for q in own if q.get("node") in (None, "", me)]
    if is_local(request):
        return home_here
    merged = {(q["vhost"], q["name"]): q for q in await gather(request, home_here, path)}
    for q in own:  # stand-ins of queues whose home node did not answer
        merged.setdefault((q["vhost"], q["name"]), q)
    return sorted(merged.values(), key=lambda q: (q["vhost"], q["name"]))


SUMMED = ("connections", "channels", "consumers")
STATS = ("publish", "deliver_get", "ack", "redeliver")
LENGTHS = ("messages", "messages_ready", "messages_unacknowledged")


async def cluster_overview(request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (this node's overview) with the whole cluster's figures: connections,
    channels and consumers of every node, message counters and rates summed, and the
    queue totals of every queue as its home node counts it."""
    others = peers(request)
    if not others:
        return body
    answers = await asyncio.gather(*(ask(request, m, "/api/overview") for m in others))
    for answer in answers:
        if not isinstance(answer, dict):
            continue
        totals = answer.get("object_totals", {})
        for name in SUMMED:
            body["object_totals"][name] = body["object_totals"].get(name, 0) + int(
                totals.get(name, 0)
            )
        stats = answer.get("message_stats", {})
        for name in STATS:
            _add(body["message_stats"], stats, name)
        body["listeners"] += answer.get("listeners", [])
    b = management(request)
    own = [serialize.queue(q) for q in b.queries.list_queues()]
    queues = await gather_queues(request, own, "/api/queues")
    for name in LENGTHS:
        body["queue_totals"][name] = sum(int(q.get(name, 0)) for q in queues)
    return body


def _add(into: dict[str, Any], other: dict[str, Any], name: str) -> None:
    into[name] = into.get(name, 0) + int(other.get(name, 0))
    mine = into.setdefault(f"{name}_details", {"rate": 0.0})
    mine["rate"] = float(mine.get("rate", 0.0)) + float(
        other.get(f"{name}_details", {}).get("rate", 0.0)
    )


async def post_to_home(request: web.Request, home: str, body: Any) -> web.Response | None:
    """This POST made on ``home``'s API instead (a queue's messages are there); None when
    ``home`` is this node, not running, or does not answer."""
    for member in peers(request):
        if member.name != home:
            continue
        headers = {h: request.headers[h] for h in FORWARDED if h in request.headers}
        headers[LOCAL] = "1"
        url = f"http://{member.host}:{member.http_port}{request.rel_url.raw_path}"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as s,
                s.post(url, headers=headers, json=body) as reply,
            ):
                return web.Response(
                    status=reply.status,
                    body=await reply.read(),
                    content_type=reply.content_type,
                )
        except (TimeoutError, aiohttp.ClientError) as exc:
            log.debug("management: node %s did not answer %s: %s", member.name, url, exc)
    return None


async def elsewhere(request: web.Request) -> web.Response | None:
    """This request (GET or DELETE of one connection) made on the other running members in
    turn, for an object this node does not have: the first answer that is not a 404, or
    None."""
    headers = {h: request.headers[h] for h in (*FORWARDED, "X-Reason") if h in request.headers}
    headers[LOCAL] = "1"
    for member in peers(request):
        url = f"http://{member.host}:{member.http_port}{request.rel_url.raw_path}"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as s,
                s.request(request.method, url, headers=headers) as reply,
            ):
                if reply.status == 404:
                    continue
                return web.Response(
                    status=reply.status,
                    body=await reply.read(),
                    content_type=reply.content_type,
                )
        except (TimeoutError, aiohttp.ClientError) as exc:
            log.debug("management: node %s did not answer %s: %s", member.name, url, exc)
    return None


async def home_queue(request: web.Request, home: str) -> dict[str, Any] | None:
    """A queue's JSON from its home node ``home`` (None: ask no one, or no answer)."""
    for member in peers(request):
        if member.name == home:
            found = await ask(request, member, request.rel_url.raw_path)
            return found if isinstance(found, dict) else None
    return None
