"""/api/vhosts: list, get, create with metadata, delete (closing its connections)."""

from __future__ import annotations

import httpx
import pika
import pytest

from tests.http.conftest import json_of, quote
from tests.support import RoostProcess, eventually


def test_default_vhost(http: httpx.Client) -> None:
    v = json_of(http.get("/api/vhosts/%2F"))
    assert v["name"] == "/" and "messages" in v and v["tracing"] is False
    assert "/" in {x["name"] for x in json_of(http.get("/api/vhosts"))}


def test_create_update_delete(http: httpx.Client, name: str) -> None:
    assert (
        http.put(f"/api/vhosts/{name}", json={"description": "d", "tags": "a,b"}).status_code == 201
    )
    v = json_of(http.get(f"/api/vhosts/{name}"))
    assert (v["description"], v["tags"], v["metadata"]) == (
        "d",
        ["a", "b"],
        {"description": "d", "tags": ["a", "b"]},
    )
    assert (
        http.put(
            f"/api/vhosts/{name}", json={"description": "e", "default_queue_type": "classic"}
        ).status_code
        == 204
    )
    assert json_of(http.get(f"/api/vhosts/{name}"))["description"] == "e"
    http.put(f"/api/queues/{name}/q", json={})
    assert http.delete(f"/api/vhosts/{name}").status_code == 204
    assert http.get(f"/api/vhosts/{name}").status_code == 404
    assert http.get(f"/api/queues/{name}").status_code == 404
    assert http.delete(f"/api/vhosts/{name}").status_code == 404


def test_bad_bodies(http: httpx.Client, name: str) -> None:
    assert http.put(f"/api/vhosts/{name}", json={"description": 5}).status_code == 400
    assert http.put(f"/api/vhosts/{name}", json={"tags": {"a": 1}}).status_code == 400
    assert http.put(f"/api/vhosts/{name}", json={"default_queue_type": "fast"}).status_code == 400


def test_delete_closes_its_connections(http: httpx.Client, mgmt: RoostProcess, name: str) -> None:
    http.put(f"/api/vhosts/{name}", json={})
    http.put(
        f"/api/permissions/{name}/guest", json={"configure": ".*", "write": ".*", "read": ".*"}
    )
    params = pika.URLParameters(mgmt.url)
    params.virtual_host = name
    conn = pika.BlockingConnection(params)
    eventually(lambda: json_of(http.get(f"/api/vhosts/{quote(name)}/connections")))
    assert http.delete(f"/api/vhosts/{name}").status_code == 204
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        conn.process_data_events(time_limit=3)
    assert info.value.reply_code == 320


def test_vhost_permissions(http: httpx.Client) -> None:
    perms = json_of(http.get("/api/vhosts/%2F/permissions"))
    assert {"user": "guest", "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"} in perms
    assert isinstance(json_of(http.get("/api/vhosts/%2F/topic-permissions")), list)
    assert http.get("/api/vhosts/nope/permissions").status_code == 404
