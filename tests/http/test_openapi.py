"""The OpenAPI document matches the routes, and schemathesis finds no 5xx in it.

Schemathesis runs as its CLI against a broker of its own (it creates and deletes users
and vhosts at random). Bounded by example count and time so it stays under a minute.
The two listener health checks are left out: they answer 503 by design when the port
or protocol is not served, which is exactly what random input asks for (they are
tested in test_health.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.http.conftest import json_of
from tests.support import RoostProcess


def test_document_lists_every_resource(http: httpx.Client) -> None:
    doc = json_of(httpx.get(f"{http.base_url}".rstrip("/") + "/api/openapi.json"))
    assert doc["openapi"].startswith("3.")
    paths = doc["paths"]
    for path in (
        "/api/overview",
        "/api/queues/{vhost}/{name}",
        "/api/bindings/{vhost}/e/{source}/q/{destination}",
        "/api/definitions",
        "/api/users/{name}",
        "/api/health/checks/alarms",
        "/api/aliveness-test/{vhost}",
        "/api/topic-permissions/{vhost}/{user}",
    ):
        assert path in paths, path
    put_queue = paths["/api/queues/{vhost}/{name}"]["put"]
    assert put_queue["requestBody"]["content"]["application/json"]["schema"]["type"] == "object"
    listing = {p["name"] for p in paths["/api/queues"]["get"]["parameters"]}
    assert {"page", "page_size", "name", "use_regex", "sort", "sort_reverse", "columns"} <= listing


@pytest.mark.slow
def test_schemathesis_finds_no_server_errors(tmp_path: Path) -> None:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st, "schemathesis is in the test extras"
    server = RoostProcess(tmp_path / "data").start()
    try:
        result = subprocess.run(
            [
                st,
                "run",
                f"{server.http_url}/api/openapi.json",
                "--checks",
                "not_a_server_error",
                "--auth",
                "guest:guest",
                "--max-examples",
                "8",
                "--seed",
                "7",
                "--generation-database",
                "none",
                "--phases",
                "examples,coverage,fuzzing",
                "--max-time",
                "30",
                "--workers",
                "1",  # hypothesis lambda introspection is not thread-safe
                "--exclude-path-regex",
                # (/api/profile records for as many seconds as asked: tests/http/test_profile.py)
                "health/checks/(port|protocol)-listener|/api/profile",
                "--warnings",
                "off",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,  # schemathesis leaves a .schemathesis/ directory behind
        )
    finally:
        server.stop()
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert "Server error" not in result.stdout, report
    assert "Traceback" not in server.log, server.log[-5000:]
