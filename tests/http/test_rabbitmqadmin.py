"""RabbitMQ's own ``rabbitmqadmin`` (Debian's rabbitmq-server ships it; scripts/test puts
it in place) drives Roost: declare, list, publish, get, delete, export and import."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.http.conftest import json_of
from tests.support import RoostProcess

ADMIN = shutil.which("rabbitmqadmin", path=f"{Path(sys.executable).parent}:/usr/bin:/usr/local/bin")
pytestmark = pytest.mark.skipif(
    ADMIN is None, reason="rabbitmqadmin not installed (scripts/test installs it)"
)


def admin(server: RoostProcess, *args: str, raw: bool = False) -> Any:
    cmd = [ADMIN, "-H", "127.0.0.1", "-P", str(server.http_port), "-u", "guest", "-p", "guest"]
    if raw:
        cmd += ["-f", "raw_json"]
    done = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout) if raw else done.stdout


def test_declare_publish_get_delete(mgmt: RoostProcess, http: httpx.Client, name: str) -> None:
    assert "queue declared" in admin(
        mgmt, "declare", "queue", f"name={name}", "durable=false", 'arguments={"x-max-length": 5}'
    )
    assert "exchange declared" in admin(mgmt, "declare", "exchange", f"name={name}.x", "type=topic")
    assert "binding declared" in admin(
        mgmt, "declare", "binding", f"source={name}.x", f"destination={name}", "routing_key=a.*"
    )
    q = json_of(http.get(f"/api/queues/%2F/{name}"))
    assert (q["durable"], q["arguments"]) == (False, {"x-max-length": 5})

    queues = {q["name"]: q for q in admin(mgmt, "list", "queues", raw=True)}
    assert queues[name]["messages"] == 0
    exchanges = {x["name"]: x for x in admin(mgmt, "list", "exchanges", raw=True)}
    assert exchanges[f"{name}.x"]["type"] == "topic"
    bindings = admin(mgmt, "list", "bindings", raw=True)
    assert any(b["source"] == f"{name}.x" and b["routing_key"] == "a.*" for b in bindings)

    assert "Message published" in admin(
        mgmt, "publish", f"exchange={name}.x", "routing_key=a.b", "payload=hello admin"
    )
    assert "NOT routed" in admin(
        mgmt, "publish", f"exchange={name}.x", "routing_key=b.b", "payload=lost"
    )
    got = admin(mgmt, "get", f"queue={name}", "ackmode=ack_requeue_false", raw=True)
    assert [(m["payload"], m["routing_key"], m["exchange"]) for m in got] == [
        ("hello admin", "a.b", f"{name}.x")
    ]
    assert admin(mgmt, "list", "queues", "name", "messages", raw=True)

    assert "queue deleted" in admin(mgmt, "delete", "queue", f"name={name}")
    assert "exchange deleted" in admin(mgmt, "delete", "exchange", f"name={name}.x")
    assert name not in {q["name"] for q in admin(mgmt, "list", "queues", raw=True)}


def test_lists_and_overview(mgmt: RoostProcess) -> None:
    overview = admin(mgmt, "show", "overview", raw=True)
    assert overview[0]["cluster_name"].startswith("roost@")
    for kind in (
        "vhosts",
        "users",
        "permissions",
        "nodes",
        "connections",
        "channels",
        "consumers",
        "policies",
    ):
        assert isinstance(admin(mgmt, "list", kind, raw=True), list), kind


def test_users_vhosts_export_import(
    mgmt: RoostProcess, http: httpx.Client, name: str, tmp_path: Path
) -> None:
    admin(mgmt, "declare", "vhost", f"name={name}")
    admin(mgmt, "declare", "user", f"name={name}", "password=pw", "tags=monitoring")
    admin(
        mgmt,
        "declare",
        "permission",
        f"vhost={name}",
        f"user={name}",
        "configure=.*",
        "write=.*",
        "read=.*",
    )
    admin(
        mgmt,
        "-V",
        name,
        "declare",
        "policy",
        "name=p",
        "pattern=.*",
        'definition={"max-length": 3}',
    )
    assert json_of(http.get(f"/api/permissions/{name}/{name}"))["read"] == ".*"
    assert json_of(http.get(f"/api/policies/{name}/p"))["definition"] == {"max-length": 3}
    exported = tmp_path / "defs.json"
    admin(mgmt, "export", str(exported))
    defs = json.loads(exported.read_text())
    assert name in {u["name"] for u in defs["users"]}
    admin(mgmt, "delete", "vhost", f"name={name}")
    assert http.get(f"/api/vhosts/{name}").status_code == 404
    admin(mgmt, "import", str(exported))
    assert json_of(http.get(f"/api/policies/{name}/p"))["pattern"] == ".*"
    admin(mgmt, "delete", "user", f"name={name}")
    admin(mgmt, "delete", "vhost", f"name={name}")
