"""/api/parameters, /api/global-parameters and /api/operator-policies in RabbitMQ 3.10's
shapes and words; an operator policy caps a user policy's limits on live queues; all of
it survives a restart and travels in definitions export and import (operator policies
as RabbitMQ carries them: parameters of component operator_policy)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pika

from tests.http.conftest import json_of
from tests.support import RoostProcess, restart


def put(http: httpx.Client, path: str, body: object) -> httpx.Response:
    return http.put(path, json=body)


def test_parameters_shapes_and_refusals(mgmt: RoostProcess, http: httpx.Client, name: str) -> None:
    assert put(http, f"/api/vhosts/{name}", {}).status_code in (201, 204)
    try:
        r = put(http, f"/api/parameters/foo/{name}/x", {"value": {"a": 1}})
        assert r.status_code == 400
        assert r.json()["reason"] == "Validation failed\n\ncomponent foo not found\n"
        upstream = {"uri": "amqp://upstream", "expires": 3600000}
        path = f"/api/parameters/federation-upstream/{name}/up"
        assert put(http, path, {"value": upstream}).status_code == 201
        assert put(http, path, {"value": upstream}).status_code == 204
        assert json_of(http.get(path)) == {
            "value": upstream,
            "vhost": name,
            "component": "federation-upstream",
            "name": "up",
        }
        limits = f"/api/parameters/vhost-limits/{name}/limits"
        assert put(http, limits, {"value": {"max-queues": 4}}).status_code == 201
        assert json_of(http.get(f"/api/vhost-limits/{name}"))[0]["value"] == {"max-queues": 4}
        listed = json_of(http.get(f"/api/parameters/vhost-limits/{name}"))
        assert [p["value"] for p in listed] == [{"max-queues": 4}]
        assert {p["component"] for p in json_of(http.get("/api/parameters"))} >= {
            "federation-upstream",
            "vhost-limits",
        }
        assert http.delete(path).status_code == 204
        assert http.get(path).status_code == 404

        g = f"/api/global-parameters/{name}"
        assert put(http, g, {"value": {"note": "hello"}}).status_code == 201
        assert json_of(http.get(g)) == {"name": name, "value": {"note": "hello"}}
        assert {"name": name, "value": {"note": "hello"}} in json_of(
            http.get("/api/global-parameters")
        )
        assert http.delete(g).status_code == 204

        op = f"/api/operator-policies/{name}/cap"
        bad = put(http, op, {"pattern": ".*", "definition": {"ha-mode": "all"}})
        assert bad.status_code == 400
        assert "are not recognised policy settings" in bad.json()["reason"]
        body = {"pattern": "^q", "definition": {"max-length": 3}, "apply-to": "queues"}
        assert put(http, op, body).status_code == 201
        assert json_of(http.get(op)) == {
            "vhost": name,
            "name": "cap",
            "pattern": "^q",
            "apply-to": "queues",
            "definition": {"max-length": 3},
            "priority": 0,
        }
    finally:
        http.delete(f"/api/vhosts/{name}")


def test_operator_policy_caps_user_policy(
    mgmt: RoostProcess, http: httpx.Client, amqp: pika.BlockingConnection, name: str
) -> None:
    ch = amqp.channel()
    ch.queue_declare(name)
    user = {"pattern": f"^{name}$", "definition": {"max-length": 10}, "apply-to": "queues"}
    assert put(http, f"/api/policies/%2F/{name}", user).status_code == 201
    operator = {"pattern": f"^{name}$", "definition": {"max-length": 4, "message-ttl": 60000}}
    assert put(http, f"/api/operator-policies/%2F/{name}", operator).status_code == 201
    try:
        for i in range(8):
            ch.basic_publish("", name, str(i).encode())
        assert ch.queue_declare(name, passive=True).method.message_count == 4  # the lower wins
        q = json_of(http.get(f"/api/queues/%2F/{name}"))
        assert q["policy"] == name and q["operator_policy"] == name
        assert q["effective_policy_definition"] == {"max-length": 4, "message-ttl": 60000}
        assert http.delete(f"/api/operator-policies/%2F/{name}").status_code == 204
        for i in range(8):
            ch.basic_publish("", name, str(i).encode())
        assert ch.queue_declare(name, passive=True).method.message_count == 10  # user's again
        assert json_of(http.get(f"/api/queues/%2F/{name}"))["operator_policy"] is None
        # an operator policy above the user's limit leaves the user's in force
        ch.queue_purge(name)
        operator["definition"] = {"max-length": 50}
        assert put(http, f"/api/operator-policies/%2F/{name}", operator).status_code == 201
        for i in range(12):
            ch.basic_publish("", name, str(i).encode())
        assert ch.queue_declare(name, passive=True).method.message_count == 10
    finally:
        http.delete(f"/api/policies/%2F/{name}")
        http.delete(f"/api/operator-policies/%2F/{name}")
        ch.queue_delete(name)


# a shovel within this broker (tests/shovel tests what shovels do)
MOVE = {"src-uri": "amqp://", "src-queue": "a", "dest-uri": "amqp://", "dest-queue": "b"}


def test_restart_and_definitions_round_trip(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        with httpx.Client(base_url=server.http_url, auth=("guest", "guest")) as http:
            put(http, "/api/parameters/shovel/%2F/move", {"value": MOVE})
            put(http, "/api/global-parameters/cluster_tag", {"value": "blue"})
            put(http, "/api/operator-policies/%2F/cap", {"pattern": ".*", "definition": {
                "max-length-bytes": 1024}})  # fmt: skip
        server = restart(server, kill=True)  # the journal, not the snapshot at stop
        with httpx.Client(base_url=server.http_url, auth=("guest", "guest")) as http:
            assert json_of(http.get("/api/parameters/shovel/%2F/move"))["value"] == MOVE
            assert json_of(http.get("/api/global-parameters/cluster_tag"))["value"] == "blue"
            assert json_of(http.get("/api/operator-policies/%2F/cap"))["definition"] == {
                "max-length-bytes": 1024
            }
            exported = json_of(http.get("/api/definitions"))
            assert {"name": "cluster_tag", "value": "blue"} in exported["global_parameters"]
            components = {p["component"]: p for p in exported["parameters"]}
            assert components["operator_policy"]["value"]["definition"] == {
                "max-length-bytes": 1024
            }
            assert components["shovel"]["name"] == "move"
            for path in (
                "/api/parameters/shovel/%2F/move",
                "/api/global-parameters/cluster_tag",
                "/api/operator-policies/%2F/cap",
            ):
                assert http.delete(path).status_code == 204
            r = http.post("/api/definitions", json=exported)
            assert r.status_code in (200, 201, 204), r.text
            assert http.get("/api/operator-policies/%2F/cap").status_code == 200
            assert http.get("/api/parameters/shovel/%2F/move").status_code == 200
            assert http.get("/api/global-parameters/cluster_tag").status_code == 200
    finally:
        server.stop()
