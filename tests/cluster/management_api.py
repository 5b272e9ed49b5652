"""The management HTTP API of a cluster node, as the cluster tests call it: reads, runtime
parameters and shovel rows."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support import RoostProcess


def api(server: RoostProcess, path: str) -> Any:
    reply = httpx.get(server.http_url + path, auth=("guest", "guest"), timeout=10)
    assert reply.status_code == 200, (path, reply.status_code, reply.text)
    return reply.json()


AUTH = ("guest", "guest")


def put(server: RoostProcess, path: str, body: Any) -> None:
    reply = httpx.put(server.http_url + path, json=body, auth=AUTH, timeout=10)
    assert reply.status_code in (201, 204), (path, reply.status_code, reply.text)


def status(server: RoostProcess, path: str) -> tuple[int, Any]:
    reply = httpx.get(server.http_url + path, auth=AUTH, timeout=10)
    return reply.status_code, reply.json() if reply.status_code == 200 else None


def shovel_rows(server: RoostProcess) -> list[str]:
    return [r["name"] for r in status(server, "/api/shovels/%2F")[1] if r["state"] == "running"]
