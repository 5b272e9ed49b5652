"""/api/definitions: import a RabbitMQ-format file and find every object; export, per-vhost
export and import, round trip, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pika
import pytest

from tests.http.conftest import client, json_of
from tests.support import RoostProcess

RABBIT_FILE = Path(__file__).parent / "data" / "rabbitmq-definitions.json"


@pytest.fixture(scope="module")
def imported(mgmt: RoostProcess) -> dict:
    data = json.loads(RABBIT_FILE.read_text())
    with client(mgmt) as http:
        r = http.post("/api/definitions", json=data, params={"report": "true"})
        assert r.status_code == 200, r.text
        assert r.json()["imported"]["queues"] == 4
    return data


def test_every_object_arrived(http: httpx.Client, mgmt: RoostProcess, imported: dict) -> None:
    users = {u["name"]: u for u in json_of(http.get("/api/users"))}
    assert users["imp-admin"]["tags"] == ["administrator"]
    assert users["imp-app"]["tags"] == ["management", "policymaker"]
    assert users["imp-admin"]["password_hash"] == imported["users"][0]["password_hash"]
    with client(mgmt, "imp-app", "guest") as c:  # the RabbitMQ hash of "guest" works as-is
        assert json_of(c.get("/api/whoami"))["name"] == "imp-app"

    vh = json_of(http.get("/api/vhosts/imp-orders"))
    assert (vh["description"], vh["tags"]) == ("order processing", ["prod"])
    assert http.get("/api/vhosts/imp-audit").status_code == 200

    perms = json_of(http.get("/api/permissions"))
    for p in imported["permissions"]:
        assert p in perms
    assert imported["topic_permissions"][0] in json_of(http.get("/api/topic-permissions"))

    policies = json_of(http.get("/api/policies"))
    for p in imported["policies"]:
        assert p in policies

    for q in imported["queues"]:
        got = json_of(http.get(f"/api/queues/{q['vhost']}/{q['name']}"))
        assert (got["durable"], got["auto_delete"], got["arguments"]) == (
            q["durable"],
            q["auto_delete"],
            q["arguments"],
        )
    assert json_of(http.get("/api/queues/imp-orders/app.orders"))["policy"] == "ttl"

    for x in imported["exchanges"]:
        got = json_of(http.get(f"/api/exchanges/{x['vhost']}/{x['name']}"))
        assert (got["type"], got["durable"], got["internal"], got["arguments"]) == (
            x["type"],
            x["durable"],
            x["internal"],
            x["arguments"],
        )

    bindings = [
        {
            k: b[k]
            for k in (
                "source",
                "vhost",
                "destination",
                "destination_type",
                "routing_key",
                "arguments",
            )
        }
        for b in json_of(http.get("/api/bindings"))
    ]
    for b in imported["bindings"]:
        assert b in bindings


def test_imported_topology_routes(mgmt: RoostProcess, imported: dict) -> None:
    params = pika.ConnectionParameters(
        "127.0.0.1", mgmt.amqp_port, "imp-orders", pika.PlainCredentials("imp-admin", "guest")
    )
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        ch.basic_publish("app.in", "orders.new", b"order-1")
        ch.basic_publish(
            "app.in", "routed.x", b"event-1", pika.BasicProperties(headers={"kind": "event"})
        )
        assert ch.basic_get("app.orders", auto_ack=True)[2] == b"order-1"
        assert ch.basic_get("app.events", auto_ack=True)[2] == b"event-1"
    finally:
        conn.close()


def test_export_round_trip(http: httpx.Client, imported: dict) -> None:
    full = json_of(http.get("/api/definitions"))
    assert {"users", "vhosts", "permissions", "policies", "queues", "exchanges", "bindings"} <= set(
        full
    )
    assert "amq.direct" not in {x["name"] for x in full["exchanges"]}
    scoped = json_of(http.get("/api/definitions/imp-orders"))
    assert "users" not in scoped and all("vhost" not in q for q in scoped["queues"])
    assert {q["name"] for q in scoped["queues"]} == {"app.orders", "app.dead", "app.events"}
    # import the vhost's export into a fresh vhost: the same objects appear there
    http.put("/api/vhosts/imp-copy", json={})
    assert http.post("/api/definitions/imp-copy", json=scoped).status_code == 204
    copy = json_of(http.get("/api/definitions/imp-copy"))
    for section in ("queues", "exchanges", "bindings", "policies"):
        key = lambda d: json.dumps(d, sort_keys=True)  # noqa: E731
        assert sorted(map(key, copy[section])) == sorted(map(key, scoped[section])), section
    download = http.get("/api/definitions", params={"download": "x.json"})
    assert 'filename="x.json"' in download.headers["content-disposition"]
    http.delete("/api/vhosts/imp-copy")


def test_import_errors_change_nothing(http: httpx.Client) -> None:
    r = http.post("/api/definitions", content=b"{nope")
    assert r.status_code == 400 and r.json()["reason"] == "not_json"
    bad = {"vhosts": [{"name": "imp-never"}], "queues": [{"name": "q"}]}  # queue lacks vhost
    r = http.post("/api/definitions", json=bad)
    assert r.status_code == 400 and "vhost" in r.json()["reason"]
    assert http.get("/api/vhosts/imp-never").status_code == 404
    r = http.post("/api/definitions", json={"queues": [{"name": "q", "vhost": "no-such-vhost"}]})
    assert r.status_code == 400 and "no-such-vhost" in r.json()["reason"]
    assert http.post("/api/definitions", json={"queues": {"name": "q"}}).status_code == 400
    assert http.post("/api/definitions", json=[1]).status_code == 400
    assert http.post("/api/definitions/no-such-vhost", json={}).status_code == 404
