"""``roost ctl``'s rabbitmqctl-named commands against RabbitMQ 3.10's own management API:
the same commands work on both brokers (the client speaks RabbitMQ's API, not Roost's
internals), including the endpoints Roost had to add for them (operator policies,
runtime and global parameters, tracing)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench._brokers import free_port, rabbitmq, rabbitmq_installed

pytestmark = [
    pytest.mark.rabbitmq,
    pytest.mark.skipif(not rabbitmq_installed(), reason="rabbitmq-server is not installed"),
]


@pytest.fixture(scope="module")
def rabbit() -> Iterator[str]:
    port = free_port()
    conf = f"management.tcp.port = {port}\nmanagement.tcp.ip = 127.0.0.1\n"
    with rabbitmq(plugins=("rabbitmq_management",), extra_conf=conf):
        yield f"http://127.0.0.1:{port}"


def ctl(url: str, *args: str, ok: bool = True) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "roost", "ctl", "--url", url, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode == 0) == ok, (args, done.stdout, done.stderr)
    return done.stdout + done.stderr


@pytest.fixture
def api(rabbit: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=rabbit, auth=("guest", "guest")) as client:
        yield client


def test_daily_commands_on_rabbitmq(rabbit: str, api: httpx.Client, tmp_path: Path) -> None:
    ctl(rabbit, "add_vhost", "ops")
    ctl(rabbit, "add_user", "alice", "pw")
    ctl(rabbit, "set_user_tags", "alice", "monitoring")
    assert api.get("/api/users/alice").json()["tags"] == ["monitoring"]
    ctl(rabbit, "set_permissions", "-p", "ops", "alice", "^a", "^b", "^c")
    assert "alice\t^a\t^b\t^c" in ctl(rabbit, "list_permissions", "-p", "ops")
    ctl(rabbit, "set_topic_permissions", "-p", "ops", "alice", "amq.topic", "^x", "^y")
    assert "alice\tamq.topic\t^x\t^y" in ctl(rabbit, "list_topic_permissions", "-p", "ops")
    ctl(rabbit, "set_vhost_limits", "-p", "ops", '{"max-queues": 7}')
    assert '{"max-queues":7}' in ctl(rabbit, "list_vhost_limits", "-p", "ops")
    ctl(rabbit, "set_user_limits", "alice", '{"max-channels": 4}')
    assert '{"max-channels":4}' in ctl(rabbit, "list_user_limits", "--user", "alice")
    ctl(rabbit, "set_policy", "-p", "ops", "cap", "^q", '{"max-length": 3}')
    assert "cap\t^q" in ctl(rabbit, "list_policies", "-p", "ops")
    ctl(
        rabbit,
        "set_operator_policy",
        "-p",
        "ops",
        "ocap",
        "^q",
        '{"max-length": 2}',
        "--apply-to",
        "queues",
    )
    assert "ocap\t^q\tqueues" in ctl(rabbit, "list_operator_policies", "-p", "ops")
    ctl(rabbit, "set_global_parameter", "ops-note", '"hello"')
    assert "ops-note\thello" in ctl(rabbit, "list_global_parameters")
    ctl(rabbit, "set_cluster_name", "ops-cluster")  # RabbitMQ's PUT /api/cluster-name too
    assert "Cluster name: ops-cluster" in ctl(rabbit, "cluster_status")
    assert "cluster_name\tops-cluster" in ctl(rabbit, "list_global_parameters")
    ctl(rabbit, "clear_global_parameter", "cluster_name")
    ctl(rabbit, "set_parameter", "-p", "ops", "vhost-limits", "limits", '{"max-connections": 9}')
    assert "vhost-limits\tlimits" in ctl(rabbit, "list_parameters", "-p", "ops")
    ctl(rabbit, "trace_on", "-p", "ops")
    assert api.get("/api/vhosts/ops").json()["tracing"] is True
    ctl(rabbit, "trace", "off", "--vhost", "ops")
    assert api.get("/api/vhosts/ops").json()["tracing"] is False
    assert "Status of node" in ctl(rabbit, "status")
    assert "Running Nodes" in ctl(rabbit, "cluster_status")
    out = tmp_path / "defs.json"
    ctl(rabbit, "export_definitions", str(out))
    assert "ops" in {v["name"] for v in json.loads(out.read_text())["vhosts"]}
    ctl(rabbit, "clear_operator_policy", "-p", "ops", "ocap")
    ctl(rabbit, "clear_policy", "-p", "ops", "cap")
    ctl(rabbit, "clear_parameter", "-p", "ops", "vhost-limits", "limits")
    ctl(rabbit, "clear_global_parameter", "ops-note")
    ctl(rabbit, "clear_user_limits", "alice", "all")
    ctl(rabbit, "delete_user", "alice")
    ctl(rabbit, "delete_vhost", "ops")
