"""Delivery, acknowledgement, prefetch and requeue semantics of the core session."""

from __future__ import annotations

import pytest

from roost.core.broker import Broker
from roost.core.errors import (
    AccessRefused,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)
from roost.core.message import Message, Properties
from roost.core.session import Session
from tests.brokers import memory_broker


class Sink:
    def __init__(self) -> None:
        self.got: list[tuple[str, int, bool, bytes]] = []
        self.cancelled: list[str] = []

    def deliver(self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message):
        self.got.append((consumer_tag, delivery_tag, redelivered, message.body))

    def consumer_cancelled(self, consumer_tag: str) -> None:
        self.cancelled.append(consumer_tag)

    def bodies(self) -> list[bytes]:
        return [b for *_, b in self.got]


@pytest.fixture
def broker() -> Broker:
    return memory_broker()


def connect(broker: Broker):
    user = broker.authenticate("guest", "guest", peer_host="127.0.0.1")
    return broker.connect(user, "/", protocol="test", peer="127.0.0.1:1")


def session(broker: Broker, client=None) -> tuple[Session, Sink]:
    sink = Sink()
    return broker.open_session(client or connect(broker), sink), sink


def publish(broker: Broker, client, queue: str, *bodies: bytes) -> None:
    for body in bodies:
        broker.publish(client, "", Message("", queue, Properties(), body))


def consume(broker: Broker, s: Session, queue: str, tag: str = "c", **kw):
    c = broker.consume(s, queue, tag, no_ack=kw.pop("no_ack", False), exclusive=False, **kw)
    s.start(c)
    return c


def test_round_robin_between_consumers(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    s1, k1 = session(broker, client)
    s2, k2 = session(broker, client)
    consume(broker, s1, "q")
    consume(broker, s2, "q")
    publish(broker, client, "q", b"1", b"2", b"3", b"4")
    assert k1.bodies() == [b"1", b"3"]
    assert k2.bodies() == [b"2", b"4"]


def test_prefetch_limits_unacked_and_ack_releases(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    s, sink = session(broker, client)
    s.set_qos(2, False)
    consume(broker, s, "q")
    publish(broker, client, "q", b"1", b"2", b"3", b"4", b"5")
    assert sink.bodies() == [b"1", b"2"]
    s.ack(1, False)
    assert sink.bodies() == [b"1", b"2", b"3"]
    s.ack(3, True)  # acks 2 and 3
    assert sink.bodies() == [b"1", b"2", b"3", b"4", b"5"]
    assert client.vhost.queues["q"].unacked == 2


def test_global_prefetch_is_shared_by_consumers(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "a")
    broker.declare_queue(client, "b")
    s, sink = session(broker, client)
    s.set_qos(3, True)
    consume(broker, s, "a", "ca")
    consume(broker, s, "b", "cb")
    publish(broker, client, "a", b"a1", b"a2", b"a3")
    publish(broker, client, "b", b"b1", b"b2")
    assert sink.bodies() == [b"a1", b"a2", b"a3"]
    s.ack(1, False)  # credit on the channel lets queue b deliver too
    assert sink.bodies() == [b"a1", b"a2", b"a3", b"b1"]


def test_nack_requeue_restores_position_and_flags_redelivered(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    publish(broker, client, "q", b"1", b"2", b"3")
    s, _ = session(broker, client)
    _t1, _e = s.get(client.vhost.queues["q"], False)
    t2, _e = s.get(client.vhost.queues["q"], False)
    s.nack(t2, True, True)  # multiple: 1 and 2 go back, in their old order
    s2, _ = session(broker, client)
    got = [s2.get(client.vhost.queues["q"], True) for _ in range(3)]
    assert [(e.message.body, e.redelivered) for _t, e in got] == [
        (b"1", True),
        (b"2", True),
        (b"3", False),
    ]


def test_unknown_delivery_tag(broker: Broker) -> None:
    s, _ = session(broker)
    with pytest.raises(PreconditionFailed, match="unknown delivery tag 7"):
        s.ack(7, False)
    with pytest.raises(PreconditionFailed):
        s.ack(7, True)
    s.ack(0, True)  # "everything outstanding" is fine with nothing outstanding


def test_double_ack_is_an_error(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    publish(broker, client, "q", b"1")
    s, _sink = session(broker, client)
    consume(broker, s, "q")
    s.ack(1, False)
    with pytest.raises(PreconditionFailed):
        s.ack(1, False)


def test_close_requeues_to_other_consumers(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    s1, _k1 = session(broker, client)
    consume(broker, s1, "q")
    publish(broker, client, "q", b"1", b"2")
    s2, k2 = session(broker, client)
    consume(broker, s2, "q")
    broker.close_session(s1)
    assert k2.got == [("c", 1, True, b"1"), ("c", 2, True, b"2")]


def test_flow_pauses_deliveries(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    s, sink = session(broker, client)
    consume(broker, s, "q", no_ack=True)
    s.set_flow(False)
    publish(broker, client, "q", b"1")
    assert sink.got == []
    s.set_flow(True)
    assert sink.bodies() == [b"1"]


def test_queue_delete_cancels_consumers(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    s, sink = session(broker, client)
    consume(broker, s, "q", "tag1")
    assert broker.delete_queue(client, "q") == 0
    assert sink.cancelled == ["tag1"]
    assert s.consumers == {}


def test_auto_delete_queue_goes_with_last_consumer(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q", auto_delete=True)
    s, _ = session(broker, client)
    consume(broker, s, "q", "a")
    consume(broker, s, "q", "b")
    s.cancel("a")
    assert "q" in client.vhost.queues
    s.cancel("b")
    assert "q" not in client.vhost.queues


def test_exclusive_queue_is_locked_and_dies_with_owner(broker: Broker) -> None:
    owner, other = connect(broker), connect(broker)
    broker.declare_queue(owner, "mine", exclusive=True)
    with pytest.raises(ResourceLocked):
        broker.declare_queue(other, "mine", passive=True)
    with pytest.raises(ResourceLocked):
        broker.purge_queue(other, "mine")
    broker.disconnect(owner)
    assert "mine" not in owner.vhost.queues


def test_redeclare_must_be_equivalent(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q", durable=True)
    with pytest.raises(PreconditionFailed, match="inequivalent arg 'durable'"):
        broker.declare_queue(client, "q", durable=False)
    broker.declare_queue(client, "q2", arguments={"x-max-length": 5})
    with pytest.raises(PreconditionFailed, match="x-max-length"):
        broker.declare_queue(client, "q2", arguments={"x-max-length": 6})
    broker.declare_queue(client, "q2", arguments={"x-max-length": 5, "x-custom": 1})


def test_reserved_names_and_default_exchange(broker: Broker) -> None:
    client = connect(broker)
    with pytest.raises(AccessRefused, match="reserved prefix"):
        broker.declare_queue(client, "amq.q")
    with pytest.raises(AccessRefused, match="reserved prefix"):
        broker.declare_exchange(client, "amq.new", "direct")
    with pytest.raises(AccessRefused, match="default exchange"):
        broker.bind_queue(client, "q", "", "k", {})
    with pytest.raises(NotFound, match="no exchange 'nope' in vhost '/'"):
        broker.publish(client, "nope", Message("nope", "", Properties(), b""))


def test_exchange_to_exchange_routing_follows_chains_without_loops(broker: Broker) -> None:
    client = connect(broker)
    for name in ("e1", "e2", "e3"):
        broker.declare_exchange(client, name, "fanout")
    broker.declare_queue(client, "q")
    broker.bind_exchange(client, "e2", "e1", "", {})
    broker.bind_exchange(client, "e3", "e2", "", {})
    broker.bind_exchange(client, "e1", "e3", "", {})  # a cycle
    broker.bind_queue(client, "q", "e3", "", {})
    assert broker.publish(client, "e1", Message("e1", "", Properties(), b"x")) == 1
    assert client.vhost.queues["q"].message_count == 1


def test_auto_delete_exchange_goes_with_last_binding(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_exchange(client, "ad", "direct", auto_delete=True)
    broker.declare_queue(client, "q")
    broker.bind_queue(client, "q", "ad", "k", {})
    broker.unbind_queue(client, "q", "ad", "k", {})
    assert "ad" not in client.vhost.exchanges


def test_reused_consumer_tag_is_refused(broker: Broker) -> None:
    client = connect(broker)
    broker.declare_queue(client, "q")
    s, _ = session(broker, client)
    consume(broker, s, "q", "t")
    with pytest.raises(NotAllowed, match="reuse consumer tag 't'"):
        consume(broker, s, "q", "t")


def test_guest_only_from_loopback(broker: Broker) -> None:
    with pytest.raises(AccessRefused):
        broker.authenticate("guest", "guest", peer_host="10.0.0.5")
    with pytest.raises(AccessRefused):
        broker.authenticate("guest", "wrong", peer_host="127.0.0.1")
    assert broker.authenticate("guest", "guest", peer_host="::1").name == "guest"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),  # all of 127.0.0.0/8, as RabbitMQ's is_loopback
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("::ffff:127.9.9.9", True),
        ("localhost", True),
        ("128.0.0.1", False),
        ("10.0.0.5", False),
        ("::ffff:10.0.0.5", False),
        ("fe80::1%eth0", False),
        ("", False),
        ("not-an-address", False),
    ],
)
def test_loopback_addresses(broker: Broker, host: str, loopback: bool) -> None:
    if loopback:
        assert broker.authenticate("guest", "guest", peer_host=host).name == "guest"
    else:
        with pytest.raises(AccessRefused, match="can only connect via localhost"):
            broker.authenticate("guest", "guest", peer_host=host)
