"""``x-consistent-hash`` exchanges, checked against RabbitMQ 3.10.8's plugin
(rabbitmq_consistent_hash_exchange) with the same pika calls."""

from __future__ import annotations

from pathlib import Path

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

from tests.features.conftest import drain, pika_params, pump
from tests.support import RoostProcess

KEYS = [f"key-{i}" for i in range(3000)]


def _bound(ch: BlockingChannel, name: str, weights: dict[str, str]) -> list[str]:
    queues = []
    for suffix, weight in weights.items():
        q = f"{name}.{suffix}"
        ch.queue_declare(q)
        ch.queue_bind(q, name, weight)
        queues.append(q)
    return queues


def _where(ch: BlockingChannel, name: str, queues: list[str], keys: list[str]) -> dict[str, str]:
    """Publish one message per key (body = key) and report which queue took each."""
    got: list[tuple[str, str]] = []
    tags = [
        ch.basic_consume(q, lambda _c, _m, _p, body, q=q: got.append((body.decode(), q)), True)
        for q in queues
    ]
    for key in keys:
        ch.basic_publish(name, key, key.encode())
    assert pump(ch.connection, lambda: len(got) >= len(keys))
    for tag in tags:
        ch.basic_cancel(tag)
    where = dict(got)
    assert len(got) == len(where) == len(keys)  # each message reached exactly one queue
    return where


def test_weights_share_the_keys_and_a_key_keeps_its_queue(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(name, "x-consistent-hash")
    queues = _bound(ch, name, {"a": "1", "b": "2", "c": "1"})
    where = _where(ch, name, queues, KEYS)
    share = {q: sum(1 for v in where.values() if v == q) / len(KEYS) for q in queues}
    assert abs(share[queues[0]] - 0.25) < 0.04
    assert abs(share[queues[1]] - 0.50) < 0.04
    assert abs(share[queues[2]] - 0.25) < 0.04
    assert _where(ch, name, queues, KEYS[:200]) == {k: where[k] for k in KEYS[:200]}


def test_a_new_binding_takes_only_its_share(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(name, "x-consistent-hash")
    queues = _bound(ch, name, {"a": "1", "b": "1", "c": "1"})
    before = _where(ch, name, queues, KEYS)
    queues += _bound(ch, name, {"d": "1"})
    after = _where(ch, name, queues, KEYS)
    moved = [k for k in KEYS if after[k] != before[k]]
    assert {after[k] for k in moved} == {f"{name}.d"}  # keys only move to the newcomer
    assert abs(len(moved) / len(KEYS) - 0.25) < 0.04


def test_hash_header_and_hash_property(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(name, "x-consistent-hash", arguments={"hash-header": "user"})
    queues = _bound(ch, name, {"a": "1", "b": "1", "c": "1", "d": "1"})
    for i in range(40):  # routing keys differ, the header decides
        ch.basic_publish(name, f"rk{i}", b"u1", pika.BasicProperties(headers={"user": "u1"}))
    counts = [len(drain(ch, q)) for q in queues]
    assert sorted(counts) == [0, 0, 0, 40]
    ch.exchange_declare(f"{name}.p", "x-consistent-hash", arguments={"hash-property": "message_id"})
    for q in queues:
        ch.queue_bind(q, f"{name}.p", "1")
    for i in range(40):
        ch.basic_publish(f"{name}.p", f"rk{i}", b"m", pika.BasicProperties(message_id="same"))
    assert sorted(len(drain(ch, q)) for q in queues) == [0, 0, 0, 40]


def test_missing_header_still_routes_to_one_queue(ch: BlockingChannel, name: str) -> None:
    # RabbitMQ 3.10 hashes the missing value ("undefined"): every such message, one queue
    ch.exchange_declare(name, "x-consistent-hash", arguments={"hash-header": "user"})
    queues = _bound(ch, name, {"a": "1", "b": "1", "c": "1"})
    for i in range(20):
        ch.basic_publish(name, f"rk{i}", b"x")
    assert sorted(len(drain(ch, q)) for q in queues) == [0, 0, 20]


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("abc", 'The binding key must be an integer: <<"abc">>'),
        ("", "The binding key must be an integer: <<>>"),
        (" 2", 'The binding key must be an integer: <<" 2">>'),
        ("0", "The binding key must be greater than 0"),
        ("-1", "The binding key must be greater than 0"),
    ],
)
def test_binding_keys_are_weights(
    conn: pika.BlockingConnection, name: str, key: str, text: str
) -> None:
    ch = conn.channel()
    ch.exchange_declare(name, "x-consistent-hash")
    ch.queue_declare(name)
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.queue_bind(name, name, key)
    assert err.value.args == (406, f"PRECONDITION_FAILED - {text}")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (
            {"hash-header": "h", "hash-property": "message_id"},
            "hash-header and hash-property are mutually exclusive",
        ),
        ({"hash-property": "nope"}, "Unsupported property: nope"),
    ],
)
def test_declare_checks_the_hash_source(
    conn: pika.BlockingConnection, name: str, args: dict[str, str], text: str
) -> None:
    with pytest.raises(ChannelClosedByBroker) as err:
        conn.channel().exchange_declare(name, "x-consistent-hash", arguments=args)
    assert err.value.args == (406, f"PRECONDITION_FAILED - {text}")


def test_management_shows_the_type(ch: BlockingChannel, http: httpx.Client, name: str) -> None:
    ch.exchange_declare(name, "x-consistent-hash", arguments={"hash-header": "h"})
    ex = http.get(f"/api/exchanges/%2F/{name}").json()
    assert ex["type"] == "x-consistent-hash" and ex["arguments"] == {"hash-header": "h"}


def test_assignment_is_the_same_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = RoostProcess(data).start()
    try:
        conn = pika.BlockingConnection(pika_params(server))
        ch = conn.channel()
        ch.exchange_declare("hx", "x-consistent-hash", durable=True)
        queues = []
        for suffix, weight in (("a", "3"), ("b", "1"), ("c", "2")):
            ch.queue_declare(f"hx.{suffix}", durable=True)
            ch.queue_bind(f"hx.{suffix}", "hx", weight)
            queues.append(f"hx.{suffix}")
        before = _where(ch, "hx", queues, KEYS[:500])
        conn.close()
        assert server.stop() == 0
        server = RoostProcess(data).start()
        conn = pika.BlockingConnection(pika_params(server))
        assert _where(conn.channel(), "hx", queues, KEYS[:500]) == before
        conn.close()
    finally:
        server.kill()
