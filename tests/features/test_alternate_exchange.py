"""Alternate exchanges (``alternate-exchange`` argument and policy key), checked against
RabbitMQ 3.10.8 with the same pika calls."""

from __future__ import annotations

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel
from pika.exceptions import ChannelClosedByBroker

from tests.features.conftest import Returns, drain, settle


def _ae_with_queue(ch: BlockingChannel, name: str) -> str:
    """A fanout alternate exchange ``name.ae`` feeding queue ``name.aeq``."""
    ch.exchange_declare(f"{name}.ae", "fanout")
    ch.queue_declare(f"{name}.aeq")
    ch.queue_bind(f"{name}.aeq", f"{name}.ae")
    return f"{name}.aeq"


def test_unroutable_message_goes_to_the_alternate(ch: BlockingChannel, name: str) -> None:
    aeq = _ae_with_queue(ch, name)
    ch.exchange_declare(name, "direct", arguments={"alternate-exchange": f"{name}.ae"})
    ch.queue_declare(f"{name}.q")
    ch.queue_bind(f"{name}.q", name, "known")
    ch.basic_publish(name, "known", b"routed")
    ch.basic_publish(name, "unknown", b"unroutable")
    method, _props, body = ch.basic_get(aeq, auto_ack=True)
    assert body == b"unroutable"
    assert (method.exchange, method.routing_key) == (name, "unknown")  # kept, as RabbitMQ
    assert drain(ch, aeq) == [] and drain(ch, f"{name}.q") == [b"routed"]


def test_mandatory_is_not_returned_when_the_alternate_routes_it(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    aeq = _ae_with_queue(ch, name)
    ch.exchange_declare(name, "direct", arguments={"alternate-exchange": f"{name}.ae"})
    ch.exchange_declare(f"{name}.empty-ae", "direct")
    for exchange, alternate in (("x2", "empty-ae"), ("x3", "missing")):
        args = {"alternate-exchange": f"{name}.{alternate}"}
        ch.exchange_declare(f"{name}.{exchange}", "direct", arguments=args)
    returns = Returns(ch)
    ch.basic_publish(name, "k", b"via-ae", mandatory=True)
    ch.basic_publish(f"{name}.x2", "k", b"ae-routes-nowhere", mandatory=True)
    ch.basic_publish(f"{name}.x3", "k", b"ae-missing", mandatory=True)
    settle(conn)
    assert returns.items == [
        (312, f"{name}.x2", "k", b"ae-routes-nowhere"),
        (312, f"{name}.x3", "k", b"ae-missing"),
    ]
    assert drain(ch, aeq) == [b"via-ae"]


def test_alternates_chain_and_cycles_end(
    conn: pika.BlockingConnection, ch: BlockingChannel, name: str
) -> None:
    aeq = _ae_with_queue(ch, name)
    ch.exchange_declare(f"{name}.mid", "direct", arguments={"alternate-exchange": f"{name}.ae"})
    ch.exchange_declare(name, "direct", arguments={"alternate-exchange": f"{name}.mid"})
    ch.exchange_declare(f"{name}.c1", "direct", arguments={"alternate-exchange": f"{name}.c2"})
    ch.exchange_declare(f"{name}.c2", "direct", arguments={"alternate-exchange": f"{name}.c1"})
    returns = Returns(ch)
    ch.basic_publish(name, "k", b"two hops")
    ch.basic_publish(f"{name}.c1", "k", b"cycle", mandatory=True)
    settle(conn)
    assert drain(ch, aeq) == [b"two hops"]
    assert returns.items == [(312, f"{name}.c1", "k", b"cycle")]


def test_an_exchange_reached_by_binding_uses_its_own_alternate(
    ch: BlockingChannel, name: str
) -> None:
    aeq = _ae_with_queue(ch, name)
    ch.exchange_declare(f"{name}.inner", "direct", arguments={"alternate-exchange": f"{name}.ae"})
    ch.exchange_declare(name, "direct")
    ch.exchange_bind(f"{name}.inner", name, "k")
    ch.basic_publish(name, "k", b"inner routes nowhere")
    assert drain(ch, aeq) == [b"inner routes nowhere"]


def test_an_internal_exchange_may_be_the_alternate(ch: BlockingChannel, name: str) -> None:
    ch.exchange_declare(f"{name}.ae", "fanout", internal=True)
    ch.queue_declare(f"{name}.aeq")
    ch.queue_bind(f"{name}.aeq", f"{name}.ae")
    ch.exchange_declare(name, "topic", arguments={"alternate-exchange": f"{name}.ae"})
    ch.basic_publish(name, "a.b", b"x")
    assert drain(ch, f"{name}.aeq") == [b"x"]


def test_redeclare_compares_the_alternate_as_rabbitmq_does(
    conn: pika.BlockingConnection, name: str
) -> None:
    ch = conn.channel()
    ch.exchange_declare(name, "direct", arguments={"alternate-exchange": "ae1"})
    ch.exchange_declare(name, "direct", arguments={"alternate-exchange": "ae1"})  # same: fine
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.exchange_declare(name, "direct", arguments={"alternate-exchange": "other"})
    assert err.value.args == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange '{name}' "
        "in vhost '/': received 'other' but current is 'ae1'",
    )
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.exchange_declare(name, "direct")
    assert err.value.args == (
        406,
        f"PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange '{name}' "
        "in vhost '/': received none but current is the value 'ae1' of type 'longstr'",
    )
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as err:
        ch.exchange_declare(f"{name}.bad", "direct", arguments={"alternate-exchange": 5})
    assert err.value.args == (
        406,
        f"PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in "
        f"exchange '{name}.bad' in vhost '/'",
    )


def test_policy_sets_the_alternate_and_the_argument_wins(
    ch: BlockingChannel, http: httpx.Client, name: str
) -> None:
    aeq = _ae_with_queue(ch, name)
    ch.exchange_declare(f"{name}.other-ae", "fanout")
    ch.queue_declare(f"{name}.other-aeq")
    ch.queue_bind(f"{name}.other-aeq", f"{name}.other-ae")
    ch.exchange_declare(f"{name}.plain", "direct")
    ch.exchange_declare(
        f"{name}.arg", "direct", arguments={"alternate-exchange": f"{name}.other-ae"}
    )
    policy = {
        "pattern": f"^{name}\\.(plain|arg)$",
        "definition": {"alternate-exchange": f"{name}.ae"},
        "apply-to": "exchanges",
    }
    assert http.put(f"/api/policies/%2F/{name}", json=policy).status_code == 201
    try:
        ch.basic_publish(f"{name}.plain", "k", b"policy")
        ch.basic_publish(f"{name}.arg", "k", b"argument")
        assert drain(ch, aeq) == [b"policy"]
        assert drain(ch, f"{name}.other-aeq") == [b"argument"]
    finally:
        assert http.delete(f"/api/policies/%2F/{name}").status_code == 204
    ch.basic_publish(f"{name}.plain", "k", b"no policy any more")
    assert drain(ch, aeq) == []
