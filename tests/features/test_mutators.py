"""Message mutators set by a policy (``message-mutators``): the built-ins add-timestamp
and json-schema, chains, drops, and a mutator that raises (dead-lettered with
``x-mutator-error`` or refused to a confirming publisher), over AMQP and STOMP."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika
import pika.exceptions
import pytest
import stomp

from tests.features.conftest import dead_letter_queue, wait_get
from tests.support import RoostProcess, running

PLUGIN = "tests.features.mutator_plugin"
SCHEMA = {
    "type": "object",
    "required": ["id", "amount"],
    "properties": {"id": {"type": "string", "minLength": 1},
                   "amount": {"type": "number", "minimum": 0}},
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    env = {"ROOST_MUTATORS": f"boom={PLUGIN}:boom,drop-marked={PLUGIN}:drop_marked,"
                             f"shout={PLUGIN}:shout,bail-out={PLUGIN}:bail_out"}
    yield from running(RoostProcess(Path(tmp_path_factory.mktemp("mutators")), env=env))


@pytest.fixture
def http(server: RoostProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.http_url, auth=("guest", "guest"), timeout=10) as c:
        yield c


@pytest.fixture
def ch(server: RoostProcess) -> Iterator[Any]:
    conn = pika.BlockingConnection(pika.URLParameters(server.url))
    yield conn.channel()
    if conn.is_open:
        conn.close()


def _policy(
    http: httpx.Client, queue: str, definition: dict[str, Any], apply_to: str = "queues"
) -> None:
    body = {"pattern": "^" + re.escape(queue) + "$", "definition": definition,
            "apply-to": apply_to}
    r = http.put(f"/api/policies/%2F/{queue}", json=body)
    assert r.status_code in (201, 204), r.text


def _counter(server: RoostProcess, name: str) -> int:
    text = httpx.get(server.http_url + "/metrics").text
    match = re.search(rf"^{name} (\d+)", text, re.MULTILINE)
    assert match is not None, text
    return int(match.group(1))


def test_add_timestamp(http: httpx.Client, ch: Any, qname: str) -> None:
    ch.queue_declare(qname)
    _policy(http, qname, {"message-mutators": ["add-timestamp"]})
    before = time.time()
    ch.basic_publish("", qname, b"x")
    _, props, body = wait_get(ch, qname)
    assert body == b"x"
    assert abs(props.headers["x-received-at"] / 1000 - before) < 5
    assert abs(props.timestamp - before) < 5


def test_json_schema_passes_matching_bodies_and_nacks_the_rest(
    server: RoostProcess, http: httpx.Client, ch: Any, qname: str
) -> None:
    ch.queue_declare(qname)
    _policy(http, qname, {"message-mutators": "json-schema",
                          "message-mutator-args": {"json-schema": {"schema": SCHEMA}}})
    ch.confirm_delivery()
    rejected = _counter(server, "roost_mutator_rejected_total")
    ch.basic_publish("", qname, json.dumps({"id": "a", "amount": 3}).encode())
    for bad in (b"not json", b'{"id": "a"}', b'{"id": "a", "amount": -1}',
                b'{"id": "a", "amount": 1, "extra": true}'):
        with pytest.raises(pika.exceptions.NackError):
            ch.basic_publish("", qname, bad)
    assert ch.queue_declare(qname, passive=True).method.message_count == 1
    assert _counter(server, "roost_mutator_rejected_total") == rejected + 4


def test_a_raising_mutator_dead_letters_with_the_reason(
    server: RoostProcess, http: httpx.Client, ch: Any, qname: str
) -> None:
    dlq = dead_letter_queue(ch, qname + ".dlx")
    ch.queue_declare(qname)
    _policy(http, qname, {"message-mutators": ["boom"], "dead-letter-exchange": dlq})
    failures = _counter(server, "roost_mutator_failures_total")
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", qname, b"payload")
    _, props, body = wait_get(ch, dlq)
    assert body == b"payload"
    assert props.headers["x-mutator-error"] == "boom failed: RuntimeError: boom"
    assert props.headers["x-death"][0]["reason"] == "rejected"
    assert _counter(server, "roost_mutator_failures_total") == failures + 1
    assert "Traceback" not in server.log  # the broker logged one line, kept serving


def test_a_chain_runs_in_order_drops_and_stops_when_the_policy_goes(
    server: RoostProcess, http: httpx.Client, ch: Any, qname: str
) -> None:
    ch.queue_declare(qname)
    _policy(http, qname, {"message-mutators": "drop-marked, shout",
                          "message-mutator-args": {"shout": {"suffix": "!"}}})
    ch.confirm_delivery()
    ch.basic_publish("", qname, b"hello")
    ch.basic_publish("", qname, b"gone", pika.BasicProperties(headers={"drop": 1}))  # acked
    assert wait_get(ch, qname)[2] == b"HELLO!"
    assert ch.queue_declare(qname, passive=True).method.message_count == 0
    assert http.delete(f"/api/policies/%2F/{qname}").status_code == 204
    ch.basic_publish("", qname, b"plain")
    assert wait_get(ch, qname)[2] == b"plain"


def test_an_unknown_mutator_is_refused_when_set(http: httpx.Client, qname: str) -> None:
    r = http.put(f"/api/policies/%2F/{qname}",
                 json={"pattern": "^x$", "definition": {"message-mutators": ["no-such"]}})
    assert r.status_code == 400
    reason = r.json()["reason"]
    assert "<<\"no-such\">> is not a valid message mutator: no mutator 'no-such'" in reason
    assert http.get(f"/api/policies/%2F/{qname}").status_code == 404


def test_a_mutator_gone_after_a_restart_refuses_everything(tmp_path: Path) -> None:
    """Recovery keeps a policy whose mutator is no longer installed (and the queues after
    it); the chain fails closed: a filter that cannot be loaded lets nothing through."""
    server = RoostProcess(tmp_path, env={"ROOST_MUTATORS": f"shout={PLUGIN}:shout"}).start()
    try:
        with httpx.Client(base_url=server.http_url, auth=("guest", "guest")) as http:
            _policy(http, "shouted", {"message-mutators": ["shout"]})
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        ch = conn.channel()
        ch.queue_declare("shouted", durable=True)
        ch.queue_declare("later", durable=True)  # saved after the policy
        ch.confirm_delivery()
        ch.basic_publish("", "shouted", b"kept", pika.BasicProperties(delivery_mode=2))
        conn.close()
        server.stop()
        server.env = {"ROOST_MUTATORS": ""}  # the plugin is gone
        server.start()
        with httpx.Client(base_url=server.http_url, auth=("guest", "guest")) as http:
            assert http.get("/api/policies/%2F/shouted").status_code == 200
            assert http.get("/api/queues/%2F/later").status_code == 200
        conn = pika.BlockingConnection(pika.URLParameters(server.url))
        ch = conn.channel()
        ch.confirm_delivery()
        with pytest.raises(pika.exceptions.NackError):
            ch.basic_publish("", "shouted", b"x")
        assert wait_get(ch, "shouted")[2] == b"KEPT"  # recovered as stored
        conn.close()
        assert "no mutator 'shout'" in server.log
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


def test_stomp_sends_pass_through_the_chain(
    server: RoostProcess, http: httpx.Client, ch: Any, qname: str
) -> None:
    ch.queue_declare(qname, durable=True)
    _policy(http, qname, {"message-mutators": ["shout"]})
    conn = stomp.Connection([("127.0.0.1", server.stomp_port)])
    conn.connect("guest", "guest", wait=True)
    conn.send(f"/queue/{qname}", "from stomp")
    conn.disconnect()
    assert wait_get(ch, qname)[2] == b"FROM STOMP"


def test_an_exchange_policy_mutates_before_routing(
    http: httpx.Client, ch: Any, qname: str
) -> None:
    """Mutators on an exchange run once per publish, before routing: every bound queue
    gets the changed message; a refusal is a nack, not an unroutable return."""
    ex = qname + ".ex"
    ch.exchange_declare(ex, "fanout")
    for suffix in ("a", "b"):
        ch.queue_declare(f"{qname}.{suffix}")
        ch.queue_bind(f"{qname}.{suffix}", ex)
    _policy(http, ex, {"message-mutators": ["shout", "json-schema"],
                       "message-mutator-args": {"json-schema": {"schema": {"type": "string"}}}},
            apply_to="exchanges")
    ch.confirm_delivery()
    ch.basic_publish(ex, "", b'"quiet"', mandatory=True)
    assert wait_get(ch, qname + ".a")[2] == b'"QUIET"'
    assert wait_get(ch, qname + ".b")[2] == b'"QUIET"'
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish(ex, "", b"[1]", mandatory=True)


@pytest.mark.parametrize("mutator", ["boom", "bail-out"])
def test_a_failing_mutator_on_an_exchange_is_counted_and_nacked(
    server: RoostProcess, http: httpx.Client, ch: Any, qname: str, mutator: str
) -> None:
    """On the exchange path too a failure (an exception, or sys.exit()) is a nack and a
    count; the broker, the channel and the other exchanges carry on."""
    ex = qname + ".ex"
    ch.exchange_declare(ex, "fanout")
    ch.queue_declare(qname)
    ch.queue_bind(qname, ex)
    _policy(http, ex, {"message-mutators": [mutator]}, apply_to="exchanges")
    failures = _counter(server, "roost_mutator_failures_total")
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish(ex, "", b"x", mandatory=True)
    assert _counter(server, "roost_mutator_failures_total") == failures + 1
    assert ch.queue_declare(qname, passive=True).method.message_count == 0
    ch.basic_publish("", qname, b"direct")  # the same channel, another exchange
    assert wait_get(ch, qname)[2] == b"direct"
    assert server.proc is not None and server.proc.poll() is None
