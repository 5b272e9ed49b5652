"""/api/exchanges: list, get, declare, delete, publish, bindings; error codes."""

from __future__ import annotations

import httpx

from tests.http.conftest import json_of


def test_declare_get_list_delete(http: httpx.Client, name: str) -> None:
    body = {
        "type": "topic",
        "durable": True,
        "auto_delete": False,
        "internal": False,
        "arguments": {"alternate-exchange": "amq.fanout"},
    }
    assert http.put(f"/api/exchanges/%2F/{name}", json=body).status_code == 201
    assert http.put(f"/api/exchanges/%2F/{name}", json=body).status_code == 204
    x = json_of(http.get(f"/api/exchanges/%2F/{name}"))
    assert (x["name"], x["type"], x["durable"], x["arguments"]) == (
        name,
        "topic",
        True,
        {"alternate-exchange": "amq.fanout"},
    )
    names = {e["name"] for e in json_of(http.get("/api/exchanges/%2F"))}
    assert {"", "amq.direct", "amq.topic", name} <= names
    assert http.delete(f"/api/exchanges/%2F/{name}").status_code == 204
    assert http.get(f"/api/exchanges/%2F/{name}").status_code == 404


def test_default_exchange_is_amq_default(http: httpx.Client) -> None:
    x = json_of(http.get("/api/exchanges/%2F/amq.default"))
    assert (x["name"], x["type"]) == ("", "direct")


def test_errors(http: httpx.Client, name: str) -> None:
    r = http.put(f"/api/exchanges/%2F/{name}", json={"type": "nope"})
    assert r.status_code == 400 and "invalid exchange type" in r.json()["reason"]
    http.put(f"/api/exchanges/%2F/{name}", json={"type": "direct"})
    r = http.put(f"/api/exchanges/%2F/{name}", json={"type": "fanout"})
    assert r.status_code == 400 and "inequivalent" in r.json()["reason"]
    assert http.put("/api/exchanges/%2F/amq.new", json={"type": "direct"}).status_code == 403
    assert http.delete("/api/exchanges/%2F/amq.direct").status_code == 403
    assert http.delete("/api/exchanges/%2F/missing").status_code == 404
    assert http.get("/api/exchanges/novhost/x").status_code == 404
    http.put(f"/api/queues/%2F/{name}", json={})
    http.post(f"/api/bindings/%2F/e/{name}/q/{name}", json={"routing_key": "k"})
    assert (
        http.delete(f"/api/exchanges/%2F/{name}", params={"if-unused": "true"}).status_code == 400
    )


def test_publish(http: httpx.Client, name: str) -> None:
    http.put(f"/api/exchanges/%2F/{name}", json={"type": "fanout"})
    msg = {"routing_key": "", "payload": "hi", "payload_encoding": "string", "properties": {}}
    assert json_of(http.post(f"/api/exchanges/%2F/{name}/publish", json=msg)) == {"routed": False}
    http.put(f"/api/queues/%2F/{name}", json={})
    http.post(f"/api/bindings/%2F/e/{name}/q/{name}", json={"routing_key": ""})
    assert json_of(http.post(f"/api/exchanges/%2F/{name}/publish", json=msg)) == {"routed": True}
    x = json_of(http.get(f"/api/exchanges/%2F/{name}"))
    assert x["message_stats"]["publish_in"] == 2 and x["message_stats"]["publish_out"] == 1


def test_publish_bad_bodies(http: httpx.Client) -> None:
    url = "/api/exchanges/%2F/amq.default/publish"
    ok = {"routing_key": "q", "payload": "x", "payload_encoding": "string", "properties": {}}
    assert http.post(url, json={"routing_key": "q"}).status_code == 400
    assert (
        http.post(url, json={**ok, "payload_encoding": "base64", "payload": "%%%"}).status_code
        == 400
    )
    assert http.post(url, json={**ok, "payload_encoding": "hex"}).status_code == 400
    assert http.post(url, json={**ok, "properties": {"delivery_mode": "two"}}).status_code == 400
    assert http.post(url, json={**ok, "properties": {"bogus": 1}}).status_code == 400
    assert http.post(url, json=[1, 2]).status_code == 400
    assert http.post("/api/exchanges/%2F/missing/publish", json=ok).status_code == 404


def test_source_and_destination_bindings(http: httpx.Client, name: str) -> None:
    http.put(f"/api/exchanges/%2F/{name}", json={"type": "direct"})
    http.post(f"/api/bindings/%2F/e/{name}/e/amq.fanout", json={"routing_key": "r"})
    src = json_of(http.get(f"/api/exchanges/%2F/{name}/bindings/source"))
    assert [(b["destination"], b["destination_type"]) for b in src] == [("amq.fanout", "exchange")]
    dst = json_of(http.get("/api/exchanges/%2F/amq.fanout/bindings/destination"))
    assert name in {b["source"] for b in dst}
