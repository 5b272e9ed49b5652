"""The management side of the core without a server: rates, churn, closed-connection
reasons, definitions round trip, policies, binding keys and password hashes."""

from __future__ import annotations

import base64
import hashlib

import pytest

from roost.core.auth import MD5, SHA512, check_password
from roost.core.broker import Broker, Message, Properties
from roost.core.errors import NotFound, PreconditionFailed
from roost.core.policy import Policy, effective_policy
from roost.core.queries import properties_key
from roost.core.stats import RateSampler
from tests.brokers import memory_broker


class Sink:
    def deliver(self, *args: object) -> None: ...

    def consumer_cancelled(self, tag: str) -> None: ...


def connected(broker: Broker, reason_box: list[str] | None = None):  # type: ignore[no-untyped-def]
    closer = (lambda r: reason_box.append(r)) if reason_box is not None else None
    return broker.connect(
        broker.catalog.users["guest"],
        "/",
        protocol="AMQP 0-9-1",
        peer="127.0.0.1:5000",
        closer=closer,
    )


def test_sampler_rates_are_per_second_and_never_negative() -> None:
    s = RateSampler()
    s.begin(100.0)
    s.observe("q", ("publish",), (10,))
    s.end()
    s.begin(102.0)
    assert s.observe("q", ("publish",), (30,)).get("publish") == 10.0
    s.end()
    assert s.rates("q").get("publish") == 10.0
    s.begin(104.0)
    assert s.observe("q", ("publish",), (5,)).get("publish") == 0.0  # recreated object
    s.end()
    s.begin(105.0)
    s.end()
    assert s.rates("q").get("publish") == 0.0  # not observed: forgotten


def test_overview_rates_and_monotonic_totals() -> None:
    b = memory_broker()
    client = connected(b)
    b.declare_queue(client, "q")
    b.management.activity.sample_rates(now=1000.0)
    for _ in range(8):
        b.publish(client, "", Message("", "q", Properties(), b"x"))
    b.management.activity.sample_rates(now=1002.0)
    info = b.management.activity.overview()
    assert info.rates.get("publish") == 4.0 and info.totals.published == 8
    assert b.management.queries.queue_info("/", "q").rates.get("publish") == 4.0
    assert [s.value for s in info.history["messages_ready"]] == [0, 8]
    b.delete_queue(client, "q")
    b.delete_exchange(client, "nothing")
    activity = b.management.activity
    assert activity.totals().published == 8  # deleting the queue keeps the exchange counts
    assert activity.churn().queue_created == 1 and activity.churn().queue_deleted == 1


def test_disconnect_keeps_the_reason_and_the_bytes() -> None:
    b = memory_broker()
    client = connected(b)
    client.traffic.recv_oct += 100
    session = b.open_session(client, Sink(), number=3)
    channel = b.management.activity.list_channels()[0]
    assert channel.number == 3 and channel.name == "127.0.0.1:5000 (3)"
    b.close_session(session)
    b.disconnect(client, "client closed the socket")
    closed = b.management.activity.list_connections(closed=True)
    assert [(c.name, c.closed_reason, c.state) for c in closed] == [
        ("127.0.0.1:5000", "client closed the socket", "closed")
    ]
    assert b.management.activity.totals().recv_oct == 100
    churn = b.management.activity.churn()
    assert (churn.connection_created, churn.connection_closed) == (1, 1)
    assert (churn.channel_created, churn.channel_closed) == (1, 1)


def test_close_connection_and_delete_user_ask_the_adapter() -> None:
    b = memory_broker()
    reasons: list[str] = []
    connected(b, reasons)
    b.management.operations.close_connection("127.0.0.1:5000", "maintenance")
    b.catalog.put_user("alice", password="pw", tags="management")
    b.catalog.put_permission("alice", "/", configure=".*", write=".*", read=".*")
    alice = b.connect(
        b.catalog.users["alice"],
        "/",
        protocol="AMQP 0-9-1",
        peer="127.0.0.1:6000",
        closer=reasons.append,
    )
    assert alice
    b.catalog.delete_user("alice")
    assert reasons == ["maintenance", "user 'alice' was deleted"]
    assert b.management.queries.list_permissions(user="alice") == []
    with pytest.raises(NotFound):
        b.management.operations.close_connection("nope", "x")


def test_definitions_round_trip() -> None:
    a = memory_broker()
    a.catalog.put_vhost("v", description="d", tags="x,y")
    a.catalog.put_user("bob", password="pw", tags=["monitoring"])
    a.catalog.put_permission("bob", "v", configure="^c", write="^w", read="^r")
    a.catalog.put_topic_permission("bob", "v", exchange="amq.topic", write="^a", read="^b")
    a.catalog.put_policy(
        "v", "p", pattern="^q", definition={"max-length": 1}, priority=2, apply_to="queues"
    )
    a.management.import_definitions(
        {
            "exchanges": [{"name": "x", "vhost": "v", "type": "topic"}],
            "queues": [{"name": "q", "vhost": "v", "arguments": {"x-max-priority": 5}}],
            "bindings": [
                {
                    "source": "x",
                    "vhost": "v",
                    "destination": "q",
                    "destination_type": "queue",
                    "routing_key": "a.#",
                    "arguments": {"k": [1, 2]},
                }
            ],
        }
    )
    exported = a.management.export_definitions()
    b = memory_broker()
    b.management.import_definitions(exported)
    again = b.management.export_definitions()
    for section in (
        "users",
        "vhosts",
        "permissions",
        "topic_permissions",
        "policies",
        "queues",
        "exchanges",
        "bindings",
    ):
        key = lambda d: repr(sorted(d.items()))  # noqa: E731
        assert sorted(map(key, again[section])) == sorted(map(key, exported[section])), section
    assert b.catalog.users["bob"].check("pw")
    assert b.management.queries.queue_info("v", "q").policy is not None


def test_import_validates_before_applying() -> None:
    b = memory_broker()
    with pytest.raises(PreconditionFailed, match="destination_type"):
        b.management.import_definitions(
            {
                "vhosts": [{"name": "new"}],
                "bindings": [
                    {"source": "a", "vhost": "/", "destination": "q", "destination_type": "topic"}
                ],
            }
        )
    assert "new" not in b.vhosts
    with pytest.raises(PreconditionFailed, match="durable"):
        b.management.import_definitions({"queues": [{"name": "q", "vhost": "/", "durable": "yes"}]})


def test_policy_choice_and_validation() -> None:
    low = Policy("/", "a", "^q", {"max-length": 1}, priority=1)
    high = Policy("/", "b", "^q", {"max-length": 2}, priority=5, apply_to="queues")
    ex_only = Policy("/", "c", ".*", {"alternate-exchange": "x"}, priority=9, apply_to="exchanges")
    assert effective_policy([low, high, ex_only], "queue", "q1") is high
    assert effective_policy([low, high, ex_only], "exchange", "q1") is ex_only
    assert effective_policy([low], "queue", "other") is None
    with pytest.raises(PreconditionFailed):
        Policy("/", "bad", "(", {"a": 1})
    with pytest.raises(PreconditionFailed):
        Policy("/", "bad", ".*", {"a": 1}, apply_to="cats")


def test_properties_key() -> None:
    assert properties_key("", {}) == "~"
    assert properties_key("a.#", {}) == "a.%23"
    with_args = properties_key("k", {"x": 1})
    assert with_args.startswith("k~") and with_args == properties_key("k", {"x": 1})
    assert with_args != properties_key("k", {"x": 2})


@pytest.mark.parametrize(("algorithm", "digest"), [(SHA512, hashlib.sha512), (MD5, hashlib.md5)])
def test_other_rabbitmq_hashes_verify(algorithm: str, digest) -> None:  # type: ignore[no-untyped-def]
    salt = b"\x01\x02\x03\x04"
    stored = base64.b64encode(salt + digest(salt + b"secret").digest()).decode()
    assert check_password(stored, "secret", algorithm)
    assert not check_password(stored, "other", algorithm)
