"""/api/queues: list, get, declare, delete, purge, get messages, bindings; error codes."""

from __future__ import annotations

import base64

import httpx
import pika

from tests.http.conftest import json_of
from tests.support import eventually


def test_declare_get_list_delete(http: httpx.Client, name: str) -> None:
    r = http.put(
        f"/api/queues/%2F/{name}", json={"durable": True, "arguments": {"x-max-length": 10}}
    )
    assert r.status_code == 201
    assert (
        http.put(
            f"/api/queues/%2F/{name}", json={"durable": True, "arguments": {"x-max-length": 10}}
        ).status_code
        == 204
    )
    q = json_of(http.get(f"/api/queues/%2F/{name}"))
    assert (q["name"], q["vhost"], q["durable"], q["type"]) == (name, "/", True, "classic")
    assert q["arguments"] == {"x-max-length": 10}
    assert q["messages"] == 0 and q["consumer_details"] == []
    assert name in {x["name"] for x in json_of(http.get("/api/queues"))}
    assert name in {x["name"] for x in json_of(http.get("/api/queues/%2F"))}
    assert http.delete(f"/api/queues/%2F/{name}").status_code == 204
    assert http.get(f"/api/queues/%2F/{name}").status_code == 404


def test_errors(http: httpx.Client, name: str) -> None:
    assert http.get("/api/queues/%2F/no-such-queue").status_code == 404
    assert http.get("/api/queues/no-such-vhost").status_code == 404
    assert http.delete("/api/queues/%2F/no-such-queue").status_code == 404
    r = http.put(f"/api/queues/%2F/{name}", content=b"{not json")
    assert r.status_code == 400 and r.json() == {"error": "bad_request", "reason": "not_json"}
    r = http.put(f"/api/queues/%2F/{name}", json={"durable": "maybe"})
    assert r.status_code == 400 and "durable" in r.json()["reason"]
    assert http.put(f"/api/queues/%2F/{name}", json={"durable": True}).status_code == 201
    r = http.put(f"/api/queues/%2F/{name}", json={"durable": False})
    assert r.status_code == 400
    assert "inequivalent arg 'durable'" in r.json()["reason"]
    r = http.put("/api/queues/%2F/amq.reserved", json={})
    assert r.status_code == 400


def test_messages_publish_get_purge(http: httpx.Client, name: str) -> None:
    http.put(f"/api/queues/%2F/{name}", json={"durable": False})
    body = {
        "routing_key": name,
        "payload": "hello",
        "payload_encoding": "string",
        "properties": {"headers": {"h": 1}, "delivery_mode": 2, "content_type": "text/plain"},
    }
    assert json_of(http.post("/api/exchanges/%2F/amq.default/publish", json=body)) == {
        "routed": True
    }
    raw = {
        "routing_key": name,
        "payload": base64.b64encode(b"\xff\x00").decode(),
        "payload_encoding": "base64",
        "properties": {},
    }
    assert json_of(http.post("/api/exchanges/%2F/amq.default/publish", json=raw))["routed"]
    eventually(lambda: json_of(http.get(f"/api/queues/%2F/{name}"))["messages_ready"] == 2)

    peek = {"count": 5, "ackmode": "ack_requeue_true", "encoding": "auto"}
    got = json_of(http.post(f"/api/queues/%2F/{name}/get", json=peek))
    assert [m["payload"] for m in got] == ["hello", base64.b64encode(b"\xff\x00").decode()]
    assert [m["payload_encoding"] for m in got] == ["string", "base64"]
    assert got[0]["properties"] == {
        "headers": {"h": 1},
        "delivery_mode": 2,
        "content_type": "text/plain",
    }
    assert [m["message_count"] for m in got] == [1, 0]
    assert got[0]["redelivered"] is False
    again = json_of(http.post(f"/api/queues/%2F/{name}/get", json={**peek, "count": 1}))
    assert again[0]["redelivered"] is True  # requeued by the peek, as in RabbitMQ

    taken = json_of(
        http.post(
            f"/api/queues/%2F/{name}/get",
            json={"count": 1, "ackmode": "ack_requeue_false", "encoding": "base64"},
        )
    )
    assert base64.b64decode(taken[0]["payload"]) == b"hello"
    assert json_of(http.get(f"/api/queues/%2F/{name}"))["messages"] == 1
    assert http.delete(f"/api/queues/%2F/{name}/contents").status_code == 204
    assert json_of(http.get(f"/api/queues/%2F/{name}"))["messages"] == 0
    assert json_of(http.post(f"/api/queues/%2F/{name}/get", json=peek)) == []


def test_get_bad_bodies(http: httpx.Client, name: str) -> None:
    http.put(f"/api/queues/%2F/{name}", json={})
    url = f"/api/queues/%2F/{name}/get"
    assert http.post(url, json={"count": 1}).status_code == 400
    assert (
        http.post(
            url, json={"count": 0, "ackmode": "ack_requeue_true", "encoding": "auto"}
        ).status_code
        == 400
    )
    assert (
        http.post(url, json={"count": 1, "ackmode": "nope", "encoding": "auto"}).status_code == 400
    )
    assert (
        http.post(
            url, json={"count": 1, "ackmode": "ack_requeue_true", "encoding": "rot13"}
        ).status_code
        == 400
    )
    assert (
        http.post(
            "/api/queues/%2F/missing/get",
            json={"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"},
        ).status_code
        == 404
    )


def test_if_empty_and_if_unused(
    http: httpx.Client, amqp: pika.BlockingConnection, name: str
) -> None:
    http.put(f"/api/queues/%2F/{name}", json={})
    http.post(
        "/api/exchanges/%2F/amq.default/publish",
        json={"routing_key": name, "payload": "x", "payload_encoding": "string", "properties": {}},
    )
    r = http.delete(f"/api/queues/%2F/{name}", params={"if-empty": "true"})
    assert r.status_code == 400 and "not empty" in r.json()["reason"]
    http.delete(f"/api/queues/%2F/{name}/contents")
    ch = amqp.channel()
    ch.basic_consume(name, lambda *a: None)
    eventually(lambda: json_of(http.get(f"/api/queues/%2F/{name}"))["consumers"] == 1)
    assert http.delete(f"/api/queues/%2F/{name}", params={"if-unused": "true"}).status_code == 400
    assert http.delete(f"/api/queues/%2F/{name}").status_code == 204


def test_consumers_and_rates_show(
    http: httpx.Client, amqp: pika.BlockingConnection, name: str
) -> None:
    ch = amqp.channel()
    ch.queue_declare(name)
    ch.basic_qos(prefetch_count=3)
    ch.basic_consume(name, lambda c, m, p, b: c.basic_ack(m.delivery_tag), consumer_tag="tag-1")
    q = eventually(
        lambda: (x := json_of(http.get(f"/api/queues/%2F/{name}")))["consumers"] == 1 and x
    )
    consumer = q["consumer_details"][0]
    assert consumer["consumer_tag"] == "tag-1" and consumer["prefetch_count"] == 3
    assert consumer["queue"] == {"name": name, "vhost": "/"}

    def publishing_rate() -> float:
        for _ in range(20):
            ch.basic_publish("", name, b"m")
        amqp.process_data_events(0)
        rates = json_of(http.get(f"/api/queues/%2F/{name}"))["message_stats"]
        return rates["publish_details"]["rate"] > 0 and rates["deliver_get_details"]["rate"] > 0

    eventually(publishing_rate)
    q = json_of(http.get(f"/api/queues/%2F/{name}"))
    assert q["message_stats"]["publish"] >= 20


def test_queue_bindings(http: httpx.Client, name: str) -> None:
    http.put(f"/api/queues/%2F/{name}", json={})
    http.post(f"/api/bindings/%2F/e/amq.direct/q/{name}", json={"routing_key": "k"})
    found = json_of(http.get(f"/api/queues/%2F/{name}/bindings"))
    assert {(b["source"], b["routing_key"]) for b in found} == {("", name), ("amq.direct", "k")}
