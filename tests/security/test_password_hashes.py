"""Password hashes: RabbitMQ's rabbit_password_hashing_sha256 and dispatchd's
password_bcrypt_base64 import and log in over AMQP, STOMP and HTTP; no plaintext is kept."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pika
import pytest
import stomp

from roost.store.segment import ScanResult, scan
from tests.security.conftest import amqp_as
from tests.support import RoostProcess

# Exported by RabbitMQ 3.10.8 for a user whose password is "p".
RABBITMQ_SHA256 = "yclb7sOlYKFUPtR2Qwgd6tARoydVaRc9GUQceJKOGdv9Z4yo"
# dispatchd's README: its guest user, password "guest", bcrypt then base64.
DISPATCHD_BCRYPT = (
    "JDJhJDExJENobGk4dG5rY0RGemJhTjhsV21xR3VNNnFZZ1ZqTzUzQWxtbGtyMHRYN3RkUHMuYjF5SUt5"
)


def unique(prefix: str) -> str:
    return f"{prefix}-{os.urandom(4).hex()}"


def grant(admin: httpx.Client, user: str) -> None:
    reply = admin.put(
        f"/permissions/%2F/{user}", json={"configure": ".*", "write": ".*", "read": ".*"}
    )
    assert reply.status_code == 201


def test_rabbitmq_sha256_hash_imports_and_logs_in(
    roost: RoostProcess, admin: httpx.Client
) -> None:
    name = unique("rmq")
    defs = {"users": [{"name": name, "password_hash": RABBITMQ_SHA256,
                       "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": []}]}
    assert admin.post("/definitions", json=defs).status_code in (201, 204)
    grant(admin, name)
    with amqp_as(roost, name, "p") as conn:
        assert conn.is_open
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        amqp_as(roost, name, "wrong")


@pytest.fixture
def bcrypt_user(roost: RoostProcess, admin: httpx.Client) -> str:
    name = unique("dispatchd")
    defs = {"users": [{"name": name, "password_bcrypt_base64": DISPATCHD_BCRYPT,
                       "tags": ["management"]}]}
    assert admin.post("/definitions", json=defs).status_code in (201, 204)
    grant(admin, name)
    return name


def test_bcrypt_user_logs_in_over_amqp(roost: RoostProcess, bcrypt_user: str) -> None:
    with amqp_as(roost, bcrypt_user, "guest") as conn:
        assert conn.is_open
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        amqp_as(roost, bcrypt_user, "not-guest")


def test_bcrypt_user_logs_in_over_stomp_and_http(roost: RoostProcess, bcrypt_user: str) -> None:
    conn = stomp.Connection12([("127.0.0.1", roost.stomp_port)])
    conn.connect(bcrypt_user, "guest", wait=True)
    assert conn.is_connected()
    conn.disconnect()
    ok = httpx.get(roost.http_url + "/api/whoami", auth=(bcrypt_user, "guest"))
    assert ok.status_code == 200 and ok.json()["name"] == bcrypt_user
    bad = httpx.get(roost.http_url + "/api/whoami", auth=(bcrypt_user, "wrong"))
    assert bad.status_code == 401


def test_bcrypt_hash_is_exported_as_given(admin: httpx.Client, bcrypt_user: str) -> None:
    users = {u["name"]: u for u in admin.get("/definitions").json()["users"]}
    assert users[bcrypt_user]["password_hash"] == DISPATCHD_BCRYPT
    assert users[bcrypt_user]["hashing_algorithm"] == "bcrypt"


def test_dispatchd_users_object_imports(roost: RoostProcess, admin: httpx.Client) -> None:
    """dispatchd's config file keys users by name: {"users": {name: {...}}}."""
    name = unique("dispatchd-cfg")
    reply = admin.post(
        "/definitions", json={"users": {name: {"password_bcrypt_base64": DISPATCHD_BCRYPT}}}
    )
    assert reply.status_code in (201, 204), reply.text
    grant(admin, name)
    with amqp_as(roost, name, "guest") as conn:
        assert conn.is_open


def test_malformed_bcrypt_hash_is_refused(admin: httpx.Client) -> None:
    reply = admin.put(
        f"/users/{unique('bad')}",
        json={"password_hash": "bm90IGJjcnlwdA==", "hashing_algorithm": "bcrypt"},
    )
    assert reply.status_code == 400
    assert "bcrypt" in reply.json()["reason"]


def test_no_plaintext_password_on_disk(roost: RoostProcess, admin: httpx.Client) -> None:
    name, secret = unique("plain"), "plaintext-" + os.urandom(6).hex()
    # the reply waits until the change is on disk (the definitions journal, fsync'ed)
    assert admin.put(f"/users/{name}", json={"password": secret, "tags": ""}).status_code == 201
    files = sorted(roost.data_dir.glob("definitions*"))
    everything = b"".join(f.read_bytes() for f in files)
    assert name.encode() in everything and secret.encode() not in everything
    snapshot = json.loads((roost.data_dir / "definitions.json").read_text())
    saved = {u["name"]: u for u in snapshot["users"]}
    journal = roost.data_dir / "definitions.journal"
    if journal.exists():
        for _offset, payload in scan(journal.read_bytes(), ScanResult()):
            record = json.loads(bytes(payload))
            if record["s"] == "users" and record["v"] is not None:
                saved[record["k"][0]] = record["v"]
    assert saved[name]["hashing_algorithm"] == "rabbit_password_hashing_sha256"


@pytest.fixture
def users_file_server(tmp_path: Path) -> Iterator[RoostProcess]:
    users = tmp_path / "users.toml"
    users.write_text(
        '[[users]]\nname = "dd"\n'
        f'password_bcrypt_base64 = "{DISPATCHD_BCRYPT}"\n'
        'permissions = { "/" = { configure = ".*", write = ".*", read = ".*" } }\n'
    )
    server = RoostProcess(tmp_path / "data", "--users-file", str(users)).start()
    yield server
    server.kill()


def test_users_file_takes_bcrypt(users_file_server: RoostProcess) -> None:
    with amqp_as(users_file_server, "dd", "guest") as conn:
        assert conn.is_open
