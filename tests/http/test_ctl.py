"""``roost ctl``: the operator CLI against a real server, tables and --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.http.conftest import json_of
from tests.http.ctl_runs import ctl
from tests.support import RoostProcess


def js(server: RoostProcess, *args: str) -> Any:
    return json.loads(ctl(server, "--json", *args).stdout)


def test_queue_lifecycle(mgmt: RoostProcess, name: str) -> None:
    ctl(mgmt, "declare", "queue", name, "--argument", "x-max-length=7")
    ctl(mgmt, "declare", "exchange", f"{name}.x", "fanout")
    ctl(mgmt, "declare", "binding", f"{name}.x", name)
    table = ctl(mgmt, "list", "queues").stdout
    header = table.splitlines()[0].split()
    assert header[:3] == ["vhost", "name", "type"] and name in table
    found = {q["name"]: q for q in js(mgmt, "list", "queues")}
    assert found[name]["arguments"] == {"x-max-length": 7}
    assert js(mgmt, "publish", f"{name}.x", "", "hello ctl") == {"routed": True}
    got = js(mgmt, "get", name)
    assert got[0]["payload"] == "hello ctl" and got[0]["message_count"] == 0
    assert js(mgmt, "get", name, "--ack")[0]["redelivered"] is True
    assert js(mgmt, "get", name) == []
    ctl(mgmt, "publish", "", name, "-", stdin="from stdin")
    ctl(mgmt, "purge", name)
    assert js(mgmt, "get", name) == []
    key = next(
        b["properties_key"] for b in js(mgmt, "list", "bindings") if b["source"] == f"{name}.x"
    )
    ctl(mgmt, "delete", "binding", f"{name}.x", name, key)
    ctl(mgmt, "delete", "exchange", f"{name}.x")
    ctl(mgmt, "delete", "queue", name)
    assert name not in {q["name"] for q in js(mgmt, "list", "queues")}


def test_users_vhosts_permissions_policies(
    mgmt: RoostProcess, http: httpx.Client, name: str
) -> None:
    ctl(mgmt, "vhost", "add", name, "--description", "from ctl")
    ctl(mgmt, "user", "add", name, "--password", "pw", "--tags", "management")
    ctl(mgmt, "-V", name, "permissions", "set", name, "--configure", "^x")
    ctl(mgmt, "-V", name, "policy", "set", "lim", ".*", '{"max-length": 9}', "--priority", "2")
    assert json_of(http.get(f"/api/permissions/{name}/{name}"))["configure"] == "^x"
    assert json_of(http.get(f"/api/policies/{name}/lim"))["priority"] == 2
    assert name in ctl(mgmt, "list", "users").stdout
    assert name in {v["name"] for v in js(mgmt, "list", "vhosts")}
    assert js(mgmt, "-V", name, "list", "policies")[0]["name"] == "lim"
    ctl(mgmt, "-V", name, "policy", "clear", "lim")
    ctl(mgmt, "-V", name, "permissions", "clear", name)
    ctl(mgmt, "user", "delete", name)
    ctl(mgmt, "vhost", "delete", name)
    assert http.get(f"/api/vhosts/{name}").status_code == 404


def test_errors_are_reported(mgmt: RoostProcess) -> None:
    bad = ctl(mgmt, "delete", "queue", "no-such-queue", ok=False)
    assert "404" in bad.stderr
    wrong = ctl(mgmt, "-p", "wrong", "list", "queues", ok=False)
    assert "401" in wrong.stderr
    gone = subprocess.run(
        [sys.executable, "-m", "roost", "ctl", "--url", "http://127.0.0.1:9", "overview"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert gone.returncode == 1 and "cannot reach" in gone.stderr


def test_definitions_export_import_with_progress(
    mgmt: RoostProcess, http: httpx.Client, name: str, tmp_path: Path
) -> None:
    doc = {
        "vhosts": [{"name": name}],
        "queues": [
            {"name": f"q{i}", "vhost": name, "durable": True, "auto_delete": False, "arguments": {}}
            for i in range(1200)
        ],
        "bindings": [
            {
                "source": "amq.direct",
                "vhost": name,
                "destination": f"q{i}",
                "destination_type": "queue",
                "routing_key": f"k{i}",
                "arguments": {},
            }
            for i in range(300)
        ],
    }
    src = tmp_path / "big.json"
    src.write_text(json.dumps(doc))
    done = ctl(mgmt, "definitions", "import", str(src), "--chunk", "250")
    assert "1501/1501 objects" in done.stderr and "imported 1501 objects" in done.stderr
    assert len(json_of(http.get(f"/api/queues/{name}"))) == 1200
    out = tmp_path / "out.json"
    ctl(mgmt, "-V", name, "definitions", "export", str(out), "--only-vhost")
    exported = json.loads(out.read_text())
    assert len(exported["queues"]) == 1200 and len(exported["bindings"]) == 300
    http.delete(f"/api/vhosts/{name}")
