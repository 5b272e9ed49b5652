"""/api/overview, /api/nodes, /api/whoami, /api/cluster-name: shapes and live figures."""

from __future__ import annotations

import httpx
import pika

from tests.http.conftest import json_of
from tests.http.ctl_runs import ctl
from tests.support import RoostProcess, eventually


def test_overview_shape(http: httpx.Client, mgmt: RoostProcess) -> None:
    o = json_of(http.get("/api/overview"))
    for key in (
        "management_version",
        "product_name",
        "cluster_name",
        "node",
        "exchange_types",
        "message_stats",
        "queue_totals",
        "object_totals",
        "listeners",
        "churn_rates",
    ):
        assert key in o, key
    assert {t["name"] for t in o["exchange_types"]} >= {"direct", "fanout", "topic", "headers"}
    listeners = {(li["protocol"], li["port"]) for li in o["listeners"]}
    assert ("amqp", mgmt.amqp_port) in listeners and ("http", mgmt.http_port) in listeners
    assert set(o["object_totals"]) == {
        "connections",
        "channels",
        "consumers",
        "exchanges",
        "queues",
    }


def test_rates_and_history(http: httpx.Client, amqp: pika.BlockingConnection, name: str) -> None:
    ch = amqp.channel()
    ch.queue_declare(name)

    def rising() -> bool:
        for _ in range(10):
            ch.basic_publish("", name, b"x")
        amqp.process_data_events(0)
        o = json_of(http.get("/api/overview", params={"msg_rates_age": "60", "lengths_age": "60"}))
        details = o["message_stats"]["publish_details"]
        return (
            details["rate"] > 0
            and len(details.get("samples", [])) >= 2
            and o["queue_totals"]["messages"] > 0
        )

    eventually(rising)
    o = json_of(http.get("/api/overview", params={"msg_rates_age": "60", "lengths_age": "60"}))
    samples = o["queue_totals"]["messages_ready_details"]["samples"]
    assert samples[0]["timestamp"] >= samples[-1]["timestamp"]  # newest first, as RabbitMQ
    ch.queue_delete(name)


def test_nodes(http: httpx.Client) -> None:
    nodes = json_of(http.get("/api/nodes"))
    assert len(nodes) == 1
    n = nodes[0]
    assert n["running"] is True and n["mem_used"] > 0 and n["fd_total"] > 0 and n["uptime"] > 0
    assert json_of(http.get(f"/api/nodes/{n['name']}"))["name"] == n["name"]
    assert http.get("/api/nodes/other@host").status_code == 404


def test_whoami_and_cluster_name(http: httpx.Client) -> None:
    assert json_of(http.get("/api/whoami")) == {"name": "guest", "tags": ["administrator"]}
    assert json_of(http.get("/api/cluster-name"))["name"].startswith("roost@")
    assert json_of(http.get("/api/extensions")) == []


def test_cluster_name_follows_the_global_parameter(http: httpx.Client, mgmt: RoostProcess) -> None:
    """As RabbitMQ's: PUT /api/cluster-name sets the ``cluster_name`` global parameter;
    the API and every new AMQP connection's server properties announce it; cleared, the
    name is the node's again."""
    node = json_of(http.get("/api/overview"))["node"]
    assert json_of(http.get("/api/cluster-name")) == {"name": node}

    def announced() -> str:
        conn = pika.BlockingConnection(pika.URLParameters(mgmt.url))
        try:
            return str(conn._impl.server_properties["cluster_name"])
        finally:
            conn.close()

    assert announced() == node
    try:
        assert http.put("/api/cluster-name", json={"name": "blue"}).status_code == 204
        said = ctl(mgmt, "set_cluster_name", "green").stdout
        assert said == "Setting cluster name to green ...\n"
        assert "Cluster name: green" in ctl(mgmt, "cluster_status").stdout
        assert http.put("/api/cluster-name", json={"name": "blue"}).status_code == 204
        assert json_of(http.get("/api/global-parameters/cluster_name"))["value"] == "blue"
        assert json_of(http.get("/api/cluster-name")) == {"name": "blue"}
        assert json_of(http.get("/api/overview"))["cluster_name"] == "blue"
        assert announced() == "blue"
        assert http.put("/api/cluster-name", json={"name": ""}).status_code == 400
    finally:
        http.delete("/api/global-parameters/cluster_name")
    assert json_of(http.get("/api/cluster-name")) == {"name": node}
    assert announced() == node


def test_unknown_path_is_404_json(http: httpx.Client) -> None:
    r = http.get("/api/nothing-here")
    assert r.status_code == 404 and r.json()["error"] == "Object Not Found"
