"""GET /api/nodes: the one node, with memory, file descriptors and disk figures."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.core.info import NodeInfo
from roost.http.keys import management
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.serialize import NODE
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


def node_json(n: NodeInfo, exchange_types: tuple[str, ...]) -> dict[str, Any]:
    return {
        "name": NODE,
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


@access(MONITORING)
async def list_nodes(request: web.Request) -> web.Response:
    overview = management(request).activity.overview()
    return listing(request, [node_json(overview.node, overview.exchange_types)])


@access(MONITORING)
async def get_node(request: web.Request) -> web.Response:
    if request.match_info["node"] != NODE:
        raise not_found(f"no node '{request.match_info['node']}'")
    overview = management(request).activity.overview()
    return web.json_response(node_json(overview.node, overview.exchange_types))


async def _set_limit(request: web.Request, setter: str) -> web.Response:
    """Roost's own operator call (RabbitMQ has it in rabbitmqctl only)."""
    if request.match_info["node"] != NODE:
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
    Route("GET", "/api/nodes", list_nodes, "The nodes (Roost runs one)", listing=True),
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
