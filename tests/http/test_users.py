"""/api/users: create with a password or a RabbitMQ hash, tags, list, delete."""

from __future__ import annotations

import httpx

from tests.http.conftest import client, json_of
from tests.support import RoostProcess

# RabbitMQ 3.10's rabbit_password_hashing_sha256 hash of "guest", as it exports it
RABBIT_GUEST_HASH = "8pIgVYsWcWxxY6zmA68ISV39mv8Ny8qnx8C6y4PvaAQdbSlO"


def test_password_user(http: httpx.Client, mgmt: RoostProcess, name: str) -> None:
    assert (
        http.put(
            f"/api/users/{name}", json={"password": "s3cret", "tags": "monitoring"}
        ).status_code
        == 201
    )
    u = json_of(http.get(f"/api/users/{name}"))
    assert (u["name"], u["tags"], u["hashing_algorithm"]) == (
        name,
        ["monitoring"],
        "rabbit_password_hashing_sha256",
    )
    assert u["password_hash"]
    with client(mgmt, name, "s3cret") as c:
        assert json_of(c.get("/api/whoami")) == {"name": name, "tags": ["monitoring"]}
    # updating the tags alone keeps the password
    assert (
        http.put(f"/api/users/{name}", json={"tags": ["management", "policymaker"]}).status_code
        == 204
    )
    with client(mgmt, name, "s3cret") as c:
        assert json_of(c.get("/api/whoami"))["tags"] == ["management", "policymaker"]
    assert name in {x["name"] for x in json_of(http.get("/api/users"))}
    assert name in {x["name"] for x in json_of(http.get("/api/users/without-permissions"))}
    assert http.delete(f"/api/users/{name}").status_code == 204
    assert http.get(f"/api/users/{name}").status_code == 404
    assert http.delete(f"/api/users/{name}").status_code == 404


def test_rabbitmq_hash_imports_as_is(http: httpx.Client, mgmt: RoostProcess, name: str) -> None:
    body = {
        "password_hash": RABBIT_GUEST_HASH,
        "hashing_algorithm": "rabbit_password_hashing_sha256",
        "tags": "management",
    }
    assert http.put(f"/api/users/{name}", json=body).status_code == 201
    assert json_of(http.get(f"/api/users/{name}"))["password_hash"] == RABBIT_GUEST_HASH
    with client(mgmt, name, "guest") as c:
        assert c.get("/api/whoami").status_code == 200
    with client(mgmt, name, "wrong") as c:
        assert c.get("/api/whoami").status_code == 401


def test_user_without_password_cannot_log_in(
    http: httpx.Client, mgmt: RoostProcess, name: str
) -> None:
    assert http.put(f"/api/users/{name}", json={"tags": "administrator"}).status_code == 201
    with client(mgmt, name, "") as c:
        assert c.get("/api/whoami").status_code == 401


def test_bad_bodies(http: httpx.Client, name: str) -> None:
    assert http.put(f"/api/users/{name}", json={"password": 5}).status_code == 400
    assert http.put(f"/api/users/{name}", json={"tags": 7}).status_code == 400
    assert (
        http.put(f"/api/users/{name}", json={"password": "a", "password_hash": "b"}).status_code
        == 400
    )
    assert (
        http.put(
            f"/api/users/{name}", json={"password_hash": "x", "hashing_algorithm": "rot13"}
        ).status_code
        == 400
    )
    assert http.post("/api/users/bulk-delete", json={"users": "x"}).status_code == 400


def test_bulk_delete(http: httpx.Client, name: str) -> None:
    for i in range(2):
        http.put(f"/api/users/{name}{i}", json={"password": "p", "tags": ""})
    assert (
        http.post("/api/users/bulk-delete", json={"users": [f"{name}0", f"{name}1"]}).status_code
        == 204
    )
    assert http.get(f"/api/users/{name}0").status_code == 404


def test_user_permissions(http: httpx.Client) -> None:
    perms = json_of(http.get("/api/users/guest/permissions"))
    assert {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"} in perms
    assert {p["user"] for p in perms} == {"guest"}
    assert json_of(http.get("/api/users/guest/topic-permissions")) == []
    assert http.get("/api/users/nobody/permissions").status_code == 404
