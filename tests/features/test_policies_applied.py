"""Policies applied to queues (set over the management API, exercised with pika): the
highest-priority match applies; for lengths, TTLs, expiry and the delivery limit the lower
of policy and argument wins, for dead-lettering and overflow the argument wins, as in
RabbitMQ; a change or deletion takes effect on existing queues at once."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.features.conftest import count, dead_letter_queue, drain, wait_get
from tests.support import RoostProcess

SetPolicy = Callable[..., str]


@pytest.fixture
def policy(http: httpx.Client, qname: str) -> Iterator[SetPolicy]:
    """``policy(definition, name=…, pattern=…, priority=…, apply_to=…)``; removed after."""
    made: list[str] = []

    def put(definition: dict[str, Any], *, name: str = "p", pattern: str | None = None,
            priority: int = 0, apply_to: str = "queues") -> str:
        full = f"{qname}.{name}"
        body = {
            "pattern": pattern if pattern is not None else "^" + re.escape(qname),
            "definition": definition,
            "priority": priority,
            "apply-to": apply_to,
        }
        r = http.put(f"/api/policies/%2F/{full}", json=body)
        assert r.status_code in (201, 204), r.text
        made.append(full)
        return full

    yield put
    for full in made:
        http.delete(f"/api/policies/%2F/{full}")


def publish_all(ch: BlockingChannel, queue: str, n: int) -> None:
    for i in range(n):
        ch.basic_publish("", queue, b"%d" % i)


def test_lower_length_wins_and_arguments_win_for_the_rest(
    ch: BlockingChannel, qname: str, policy: SetPolicy
) -> None:
    dl_a = dead_letter_queue(ch, qname + "-dlA")  # outside the policy's pattern
    dl_b = dead_letter_queue(ch, qname + "-dlB")
    policy({"max-length": 2, "dead-letter-exchange": dl_a, "overflow": "reject-publish"})
    a, b, c = qname + ".a", qname + ".b", qname + ".c"
    ch.queue_declare(a, arguments={"x-max-length": 5, "x-dead-letter-exchange": dl_b})
    ch.queue_declare(b, arguments={"x-max-length": 1})
    ch.queue_declare(c, arguments={"x-overflow": "drop-head"})
    for q in (a, b, c):
        publish_all(ch, q, 4)
    assert (count(ch, a), count(ch, b), count(ch, c)) == (2, 1, 2)
    # a refused (policy overflow, no dead-letter); c dropped its head into the policy's DLX
    assert drain(ch, dl_b) == []
    assert drain(ch, dl_a) == [b"0", b"1"]
    assert drain(ch, c) == [b"2", b"3"]


def test_change_and_delete_apply_to_existing_queues(
    ch: BlockingChannel, qname: str, policy: SetPolicy, http: httpx.Client
) -> None:
    q = qname + ".q"
    ch.queue_declare(q)
    publish_all(ch, q, 5)
    name = policy({"max-length": 3})
    assert count(ch, q) == 3  # truncated at once (drop-head)
    policy({"max-length": 1})
    assert drain(ch, q) == [b"4"]
    assert http.delete(f"/api/policies/%2F/{name}").status_code == 204
    publish_all(ch, q, 4)
    assert count(ch, q) == 4


def test_highest_priority_wins(
    ch: BlockingChannel, qname: str, policy: SetPolicy, http: httpx.Client
) -> None:
    q = qname + ".q"
    policy({"max-length": 1}, name="low", priority=1)
    policy({"max-length": 3}, name="high", priority=5)
    ch.queue_declare(q)
    publish_all(ch, q, 5)
    assert count(ch, q) == 3
    info = http.get(f"/api/queues/%2F/{q}").json()
    assert info["policy"] == f"{qname}.high"
    assert info["effective_policy_definition"] == {"max-length": 3}


def test_exchange_only_policy_does_not_apply(
    ch: BlockingChannel, qname: str, policy: SetPolicy
) -> None:
    q = qname + ".q"
    policy({"max-length": 1}, apply_to="exchanges")
    ch.queue_declare(q)
    publish_all(ch, q, 3)
    assert count(ch, q) == 3


def test_policy_ttl_and_dead_letter(ch: BlockingChannel, qname: str, policy: SetPolicy) -> None:
    dlq = dead_letter_queue(ch, qname + "-dl")
    q = qname + ".q"
    ch.queue_declare(q)
    ch.basic_publish("", q, b"before")  # queued before the policy: keeps no deadline
    policy({"message-ttl": 30, "dead-letter-exchange": dlq, "dead-letter-routing-key": "k"})
    ch.basic_publish("", q, b"after")
    ch.connection.process_data_events(time_limit=0.1)
    # "after" expired behind a head that never expires: it goes once the head is taken
    assert count(ch, dlq) == 0
    assert drain(ch, q) == [b"before"]
    got, props, body = wait_get(ch, dlq)
    assert body == b"after" and got.routing_key == "k"
    assert props.headers["x-death"][0]["reason"] == "expired"


def test_policy_delivery_limit(ch: BlockingChannel, qname: str, policy: SetPolicy) -> None:
    dlq = dead_letter_queue(ch, qname + "-dl")
    q = qname + ".q"
    policy({"delivery-limit": 5, "dead-letter-exchange": dlq})
    ch.queue_declare(q, arguments={"x-delivery-limit": 0})  # the lower wins
    ch.basic_publish("", q, b"once")
    method, props, _ = ch.basic_get(q)
    assert props.headers["x-delivery-count"] == 0
    ch.basic_nack(method.delivery_tag, requeue=True)
    assert wait_get(ch, dlq)[1].headers["x-death"][0]["reason"] == "delivery_limit"


def test_policy_expires_deletes_an_unused_queue(
    ch: BlockingChannel, qname: str, policy: SetPolicy, http: httpx.Client
) -> None:
    q = qname + ".q"
    ch.queue_declare(q, arguments={"x-expires": 60_000})
    policy({"expires": 200})  # lower than the argument: it wins
    started = time.monotonic()
    while http.get(f"/api/queues/%2F/{q}").status_code == 200:
        assert time.monotonic() - started < 5, "queue never expired"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("definition", "problem"),
    [
        ({"max-length": -1}, "-1 is not a valid maximum length"),
        ({"message-ttl": "soon"}, '<<"soon">> is not a valid message TTL'),
        ({"overflow": "drop-tail"}, '<<"drop-tail">> is not a valid overflow value'),
        ({"expires": 0}, "0 is not a valid queue expiry"),
        # argument-only: RabbitMQ 3.10 refuses it in a policy with these words
        ({"max-priority": 10}, '[{<<"max-priority">>,10}] are not recognised policy settings'),
        ({"message-mutators": 5}, "5 is not a valid list of message mutators"),
        ({"message-mutators": ["ok", 1]}, '[<<"ok">>,1] is not a valid list of message mutators'),
        ({"message-mutators": "a,,b"}, '<<"a,,b">> is not a valid list of message mutators'),
        (
            {"message-mutators": ["add-timestamp", "nope"]},
            '<<"nope">> is not a valid message mutator: '
            "no mutator 'nope' (entry point group roost.mutators or $ROOST_MUTATORS)",
        ),
        (
            {"message-mutator-args": {"add-timestamp": 5}},
            '[{<<"add-timestamp">>,5}] is not a valid set of message mutator arguments '
            "(an object of objects)",
        ),
    ],
)
def test_invalid_definition_refused(
    http: httpx.Client, ch: BlockingChannel, definition: dict[str, Any], problem: str
) -> None:
    """Refused whole (HTTP 400, RabbitMQ's wording), before anything changes: no policy is
    kept, and a queue its pattern would match declares and takes messages as before."""
    qname = f"q.invalid-policy.{uuid.uuid4().hex}"  # the parameters make no clean name
    body = {"pattern": "^" + re.escape(qname), "definition": definition}
    r = http.put(f"/api/policies/%2F/{qname}", json=body)
    assert r.status_code == 400
    assert r.json()["reason"] == f"Validation failed\n\n{problem}\n"
    assert http.get(f"/api/policies/%2F/{qname}").status_code == 404
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"m")
    assert drain(ch, qname) == [b"m"]


def test_invalid_policy_in_definitions_import_changes_nothing(
    http: httpx.Client, qname: str
) -> None:
    document = {
        "queues": [{"name": qname, "vhost": "/"}],
        "policies": [{"vhost": "/", "name": qname, "pattern": "^x$",
                      "definition": {"message-mutators": 5}}],
    }
    r = http.post("/api/definitions", json=document)
    assert r.status_code == 400
    assert "policies[0]" in r.text and "not a valid list of message mutators" in r.text
    assert http.get(f"/api/queues/%2F/{qname}").status_code == 404


def test_policy_applies_to_recovered_queue(fresh_roost: RoostProcess) -> None:
    """Policies persist; after a restart they apply to the recovered durable queue."""
    with httpx.Client(base_url=fresh_roost.http_url, auth=("guest", "guest")) as http:
        r = http.put(
            "/api/policies/%2F/cap",
            json={"pattern": "^capped$", "definition": {"max-length": 2}, "apply-to": "queues"},
        )
        assert r.status_code == 201
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    ch.queue_declare("capped", durable=True)
    ch.confirm_delivery()
    for i in range(3):
        ch.basic_publish("", "capped", b"%d" % i, pika.BasicProperties(delivery_mode=2))
    conn.close()
    fresh_roost.stop()
    fresh_roost.start()
    conn = pika.BlockingConnection(pika.URLParameters(fresh_roost.url))
    ch = conn.channel()
    assert count(ch, "capped") == 2
    ch.basic_publish("", "capped", b"more", pika.BasicProperties(delivery_mode=2))
    assert drain(ch, "capped") == [b"2", b"more"]
    conn.close()


def roost_policies(server: RoostProcess, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "roost", "policies", "--url", server.http_url, *args],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_roost_policies_cli_sets_lists_and_clears(
    roost: RoostProcess, ch: BlockingChannel, qname: str
) -> None:
    """The issue's ``roost policies`` command: a policy it sets caps a live queue at once
    and is listed; cleared, the queue takes messages without a cap again."""
    name = qname + ".cap"
    ch.queue_declare(qname)
    publish_all(ch, qname, 3)
    roost_policies(roost, "set", name, "^" + re.escape(qname) + "$", '{"max-length": 1}',
                   "--apply-to", "queues", "--priority", "3")
    assert count(ch, qname) == 1  # trimmed at once (drop-head)
    listed = {p["name"]: p for p in json.loads(roost_policies(roost, "--json", "list"))}
    assert listed[name]["definition"] == {"max-length": 1}
    assert (listed[name]["apply-to"], listed[name]["priority"]) == ("queues", 3)
    assert name in roost_policies(roost, "list")  # the table
    publish_all(ch, qname, 2)
    assert drain(ch, qname) == [b"1"]
    roost_policies(roost, "clear", name)
    publish_all(ch, qname, 3)
    assert count(ch, qname) == 3
    assert name not in roost_policies(roost, "list")
