"""Who may do what: 401 for missing or wrong credentials, 403 for a missing tag or
vhost right, as RabbitMQ's management tags decide."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pika
import pytest

from tests.http.conftest import client, json_of
from tests.support import RoostProcess, eventually


def test_no_or_wrong_credentials(mgmt: RoostProcess) -> None:
    with httpx.Client(base_url=mgmt.http_url) as anonymous:
        r = anonymous.get("/api/overview")
        assert r.status_code == 401 and "Basic" in r.headers["www-authenticate"]
    with client(mgmt, "guest", "nope") as c:
        r = c.get("/api/overview")
        assert r.status_code == 401
        assert r.json() == {"error": "not_authorized", "reason": "Login failed"}
    with client(mgmt, "nobody", "x") as c:
        assert c.get("/api/whoami").status_code == 401


def test_public_endpoints(mgmt: RoostProcess) -> None:
    with httpx.Client(base_url=mgmt.http_url) as anonymous:
        assert anonymous.get("/metrics").status_code == 200
        assert anonymous.get("/api/openapi.json").status_code == 200
        assert anonymous.get("/").status_code == 200


def test_user_without_tags_is_refused(
    mgmt: RoostProcess, make_user: Callable[..., tuple[str, str]]
) -> None:
    with client(mgmt, *make_user("")) as c:
        r = c.get("/api/overview")
        assert r.status_code == 403 and r.json()["reason"] == "Not management user"


@pytest.mark.parametrize(
    ("tags", "allowed", "refused"),
    [
        (
            "management",
            ["/api/overview", "/api/queues", "/api/vhosts", "/api/whoami"],
            ["/api/users", "/api/nodes", "/api/policies", "/api/definitions", "/api/permissions"],
        ),
        ("policymaker", ["/api/policies", "/api/queues"], ["/api/users", "/api/nodes"]),
        (
            "monitoring",
            ["/api/nodes", "/api/health/checks/alarms", "/api/connections"],
            ["/api/users", "/api/policies", "/api/definitions"],
        ),
        ("administrator", ["/api/users", "/api/nodes", "/api/policies", "/api/definitions"], []),
    ],
)
def test_tags_gate_endpoints(
    mgmt: RoostProcess,
    make_user: Callable[..., tuple[str, str]],
    tags: str,
    allowed: list[str],
    refused: list[str],
) -> None:
    with client(mgmt, *make_user(tags)) as c:
        for path in allowed:
            assert c.get(path).status_code == 200, path
        for path in refused:
            assert c.get(path).status_code == 403, path


def test_management_user_sees_only_its_vhosts(
    http: httpx.Client, mgmt: RoostProcess, make_user: Callable[..., tuple[str, str]], name: str
) -> None:
    http.put(f"/api/vhosts/{name}", json={})
    http.put(f"/api/queues/{name}/hidden", json={})
    user = make_user("management")
    with client(mgmt, *user) as c:
        assert name not in {v["name"] for v in json_of(c.get("/api/vhosts"))}
        assert "hidden" not in {q["name"] for q in json_of(c.get("/api/queues"))}
        assert c.get(f"/api/queues/{name}").status_code == 403
        assert c.get(f"/api/queues/{name}/hidden").status_code == 403
        assert c.put(f"/api/queues/{name}/x", json={}).status_code == 403
    with client(mgmt, *make_user("monitoring")) as c:  # monitoring sees every vhost
        assert c.get(f"/api/queues/{name}/hidden").status_code == 200
        assert c.put(f"/api/queues/{name}/x", json={}).status_code == 403  # but may not write
    http.delete(f"/api/vhosts/{name}")


def test_permissions_apply_to_management_operations(
    http: httpx.Client, mgmt: RoostProcess, make_user: Callable[..., tuple[str, str]], name: str
) -> None:
    user, password = make_user("management")
    http.put(
        f"/api/permissions/%2F/{user}",
        json={"configure": "^mine", "write": "^mine", "read": "^mine"},
    )
    with client(mgmt, user, password) as c:
        assert c.put(f"/api/queues/%2F/mine.{name}", json={}).status_code == 201
        r = c.put(f"/api/queues/%2F/other.{name}", json={})
        assert r.status_code == 403 and "refused" in r.json()["reason"]
        publish = {
            "routing_key": "x",
            "payload": "x",
            "payload_encoding": "string",
            "properties": {},
        }
        assert c.post("/api/exchanges/%2F/amq.default/publish", json=publish).status_code == 403
        assert c.delete(f"/api/queues/%2F/mine.{name}").status_code == 204


def test_management_user_sees_only_own_connections(
    http: httpx.Client, mgmt: RoostProcess, make_user: Callable[..., tuple[str, str]]
) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(mgmt.url))  # a guest connection
    try:
        mine = eventually(
            lambda: [c for c in json_of(http.get("/api/connections")) if c["user"] == "guest"]
        )
        with client(mgmt, *make_user("management")) as c:
            assert json_of(c.get("/api/connections")) == []
            assert c.get(f"/api/connections/{mine[0]['name']}").status_code == 404
    finally:
        conn.close()
