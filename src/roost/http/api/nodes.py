"""GET /api/nodes: every node, with memory, file descriptors and disk figures. In a
cluster each running member answers for itself; a member that is down is listed with
``running: false``, as RabbitMQ lists a stopped cluster node."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from roost.core.info import MemberInfo, NodeInfo
from roost.http.cluster import ask, is_local, peers
from roost.http.keys import management
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.util import (
    ADMINISTRATOR,
    MONITORING,
    NO_CONTENT,
    access,
    bad_request,
    get_str,
    not_found,
    read_json,
)


def node_json(name: str, n: NodeInfo, exchange_types: tuple[str, ...]) -> dict[str, Any]:
    return {
        "name": name,
        "type": "disc",
        "running": True,
        "os_pid": str(n.pid),
        "uptime": n.uptime_ms,
        "processors": n.processors,
        "mem_used": n.mem_used,
        "mem_limit": n.mem_limit,
        "mem_alarm": n.mem_alarm,
        "mem_calculation_strategy": "rss",
        "disk_free": n.disk_free,
        "disk_free_limit": n.disk_free_limit,
        "disk_free_alarm": n.disk_free_alarm,
        "fd_used": n.fd_used,
        "fd_total": n.fd_total,
        "run_queue": n.run_queue,
        "rates_mode": "basic",
        "db_dir": n.data_dir,
        "exchange_types": [{"name": t, "enabled": True} for t in exchange_types],
        "applications": [{"name": "roost", "version": n.version, "description": "Roost"}],
        "python_version": n.python_version,
        "partitions": [],
    }


def down_json(m: MemberInfo) -> dict[str, Any]:
    """A member that is not running (or did not answer): what membership knows of it."""
    return {
        "name": m.name,
        "type": "disc",
        "running": False,
        "being_drained": False,
        "applications": [{"name": "roost", "version": m.version, "description": "Roost"}],
        "partitions": [],
    }


def _own(request: web.Request) -> dict[str, Any]:
    activity = management(request).activity
    overview = activity.overview()
    return node_json(activity.node_name, overview.node, overview.exchange_types)


async def _member(request: web.Request, m: MemberInfo) -> dict[str, Any]:
    if m.name == management(request).activity.node_name:
        return _own(request)
    if m.running and any(p.name == m.name for p in peers(request)):
        found = await ask(request, m, f"/api/nodes/{m.name}")
        if isinstance(found, dict):
            return found
    return down_json(m)


@access(MONITORING)
async def list_nodes(request: web.Request) -> web.Response:
    members = [] if is_local(request) else management(request).activity.cluster_members()
    if not members:
        return listing(request, [_own(request)])
    return listing(request, list(await asyncio.gather(*(_member(request, m) for m in members))))


@access(MONITORING)
async def get_node(request: web.Request) -> web.Response:
    name, activity = request.match_info["node"], management(request).activity
    if name == activity.node_name:
        return web.json_response(_own(request))
    for m in [] if is_local(request) else activity.cluster_members():
        if m.name == name:
            return web.json_response(await _member(request, m))
    raise not_found(f"no node '{name}'")


async def _set_limit(request: web.Request, setter: str) -> web.Response:
    """Roost's own operator call (RabbitMQ has it in rabbitmqctl only)."""
    if request.match_info["node"] != management(request).activity.node_name:
        raise not_found(f"no node '{request.match_info['node']}'")
    limit = get_str(await read_json(request), "limit")
    b = management(request)
    try:
        if setter == "memory":
            b.activity.set_vm_memory_high_watermark(limit)
        else:
            b.activity.set_disk_free_limit(limit)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    return web.Response(status=NO_CONTENT)


@access(ADMINISTRATOR)
async def set_memory_watermark(request: web.Request) -> web.Response:
    return await _set_limit(request, "memory")


@access(ADMINISTRATOR)
async def set_disk_free_limit(request: web.Request) -> web.Response:
    return await _set_limit(request, "disk")


ROUTES = [
    Route(
        "GET", "/api/nodes", list_nodes, "Every cluster member, down ones too", listing=True
    ),
    Route("GET", "/api/nodes/{node}", get_node, "One node"),
    Route(
        "PUT",
        "/api/nodes/{node}/vm-memory-high-watermark",
        set_memory_watermark,
        'Set the memory alarm threshold: {"limit": "0.4"} or {"limit": "512MiB"} (Roost only)',
    ),
    Route(
        "PUT",
        "/api/nodes/{node}/disk-free-limit",
        set_disk_free_limit,
        'Set the disk alarm threshold: {"limit": "50MB"} (Roost only)',
    ),
]
