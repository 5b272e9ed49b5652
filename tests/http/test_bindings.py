"""/api/bindings: every variant of source/destination, POST, GET and DELETE by key."""

from __future__ import annotations

import httpx

from tests.http.conftest import json_of, quote


def test_queue_binding_lifecycle(http: httpx.Client, name: str) -> None:
    http.put(f"/api/queues/%2F/{name}", json={})
    http.put(f"/api/exchanges/%2F/{name}", json={"type": "topic"})
    r = http.post(
        f"/api/bindings/%2F/e/{name}/q/{name}", json={"routing_key": "a.#", "arguments": {"x": 1}}
    )
    assert r.status_code == 201
    location = r.headers["location"]
    assert location.startswith(f"{name}/a.%2523~")  # RabbitMQ quotes the key twice here
    listed = json_of(http.get(f"/api/bindings/%2F/e/{name}/q/{name}"))
    assert len(listed) == 1
    b = listed[0]
    assert (b["source"], b["destination"], b["routing_key"], b["arguments"]) == (
        name,
        name,
        "a.#",
        {"x": 1},
    )
    one = json_of(http.get(f"/api/bindings/%2F/e/{name}/q/{name}/{quote(b['properties_key'])}"))
    assert one == b
    assert b in json_of(http.get("/api/bindings/%2F"))
    assert b in json_of(http.get("/api/bindings"))
    assert (
        http.delete(f"/api/bindings/%2F/e/{name}/q/{name}/{quote(b['properties_key'])}").status_code
        == 204
    )
    assert json_of(http.get(f"/api/bindings/%2F/e/{name}/q/{name}")) == []
    assert (
        http.delete(f"/api/bindings/%2F/e/{name}/q/{name}/{quote(b['properties_key'])}").status_code
        == 404
    )


def test_plain_key_and_empty_key(http: httpx.Client, name: str) -> None:
    http.put(f"/api/queues/%2F/{name}", json={})
    assert (
        http.post(f"/api/bindings/%2F/e/amq.direct/q/{name}", json={"routing_key": "k"}).headers[
            "location"
        ]
        == f"{name}/k"
    )
    assert http.post(f"/api/bindings/%2F/e/amq.fanout/q/{name}", json={}).status_code == 201
    keys = {b["properties_key"] for b in json_of(http.get(f"/api/queues/%2F/{name}/bindings"))}
    assert {"k", "~", name} <= keys
    assert http.get(f"/api/bindings/%2F/e/amq.fanout/q/{name}/~").status_code == 200


def test_exchange_to_exchange(http: httpx.Client, name: str) -> None:
    http.put(f"/api/exchanges/%2F/{name}", json={"type": "fanout"})
    r = http.post(f"/api/bindings/%2F/e/amq.direct/e/{name}", json={"routing_key": "k"})
    assert r.status_code == 201
    found = json_of(http.get(f"/api/bindings/%2F/e/amq.direct/e/{name}"))
    assert [(b["destination_type"], b["routing_key"]) for b in found] == [("exchange", "k")]
    assert http.delete(f"/api/bindings/%2F/e/amq.direct/e/{name}/k").status_code == 204


def test_errors(http: httpx.Client, name: str) -> None:
    http.put(f"/api/queues/%2F/{name}", json={})
    assert http.post(f"/api/bindings/%2F/e/missing/q/{name}", json={}).status_code == 404
    assert http.post("/api/bindings/%2F/e/amq.direct/q/missing", json={}).status_code == 404
    assert http.post(f"/api/bindings/%2F/e/amq.default/q/{name}", json={}).status_code == 403
    assert (
        http.post(f"/api/bindings/%2F/e/amq.direct/q/{name}", json={"routing_key": 5}).status_code
        == 400
    )
    assert (
        http.post(f"/api/bindings/%2F/e/amq.direct/q/{name}", json={"arguments": []}).status_code
        == 400
    )
    assert http.get(f"/api/bindings/nope/e/amq.direct/q/{name}").status_code == 404
