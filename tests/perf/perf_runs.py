"""roost perf run to the end against a test server, and the management API it reports through."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx

from tests.support import RoostProcess

PERF = [sys.executable, "-m", "roost", "perf"]


def perf(server: RoostProcess, *args: str, timeout: float = 90) -> tuple[dict[str, Any], str]:
    """Run ``roost perf`` to the end: its JSON report and its stdout."""
    done = subprocess.run(
        [*PERF, "--url", server.url, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert report.get("errors", []) == [], report
    return report, done.stdout


def api(server: RoostProcess, path: str) -> Any:
    reply = httpx.get(f"{server.http_url}/api{path}", auth=("guest", "guest"), timeout=10)
    reply.raise_for_status()
    return reply.json()
