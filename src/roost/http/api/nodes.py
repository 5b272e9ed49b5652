"""GET /api/nodes: the one node, with memory, file descriptors and disk figures."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.core.info import NodeInfo
from roost.http.keys import broker
from roost.http.listing import listing
from roost.http.routes import Route
from roost.http.serialize import NODE
from roost.http.util import MONITORING, access, not_found


def node_json(n: NodeInfo, exchange_types: tuple[str, ...]) -> dict[str, Any]:
    return {
        "name": NODE,
        "type": "disc",
        "running": True,
        "os_pid": str(n.pid),
        "uptime": n.uptime_ms,
        "processors": n.processors,
        "mem_used": n.mem_used,
        "mem_alarm": n.mem_alarm,
        "disk_free": n.disk_free,
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
    overview = broker(request).overview()
    return listing(request, [node_json(overview.node, overview.exchange_types)])


@access(MONITORING)
async def get_node(request: web.Request) -> web.Response:
    if request.match_info["node"] != NODE:
        raise not_found(f"no node '{request.match_info['node']}'")
    overview = broker(request).overview()
    return web.json_response(node_json(overview.node, overview.exchange_types))


ROUTES = [
    Route("GET", "/api/nodes", list_nodes, "The nodes (Roost runs one)", listing=True),
    Route("GET", "/api/nodes/{node}", get_node, "One node"),
]
