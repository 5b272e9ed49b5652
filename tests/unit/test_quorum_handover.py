"""What the two ends of a change of leader tell each other about the messages the old
leader had sent ahead to a member's stand-in, when the link between them never went down
(a partition shorter than the link's silence limit, a paused leader resumed).

The confirmed-message loss these guard against, in order: the member promoted deleted its
stand-in, whose purge rejected (dropped) what the old leader had sent ahead and asked the
old leader to purge; the old leader, deposed, remembered every message it forgot that way
as acked by its own clients; its stand-in, subscribed to the new leader for the member's
relayed subscription, then acked the new leader's redeliveries of exactly those messages:
the oldest block of the backlog, never handed to a consumer."""

from __future__ import annotations

from typing import Any

from roost.cluster.link import frames as f
from roost.cluster.quorum.deposed import fenced_off
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.standin import QuorumStandIn
from roost.cluster.remote_changes import RemoteChanges
from roost.core.auth import User
from roost.core.client import Client
from roost.core.message import Message, Properties
from roost.core.queues.quorum import QuorumQueue
from tests.brokers import memory_broker
from tests.quorum_links import Wire, batch

QUORUM = {"x-queue-type": "quorum"}


class Plane:
    """Records what a stand-in asks of the data plane (the frames it would send)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def reachable(self, node: str) -> bool:
        return True

    def subscribe(self, queue: Any) -> None:
        queue.consumer_id = 7
        self.sent.append(("consume", 7))

    def unsubscribe(self, queue: Any) -> None:
        consumer_id, queue.consumer_id = queue.consumer_id, 0
        self.sent.append(("cancel", consumer_id))

    def resize(self, queue: Any) -> None:
        pass

    def settle(self, queue: Any, entry: Any, op: f.SettleOp, *, requeue: bool) -> None:
        self.sent.append(("settle", (op, requeue, entry.delivery_id)))

    def queue_op(self, queue: Any, op: f.QueueOpKind) -> None:
        self.sent.append(("queue_op", op))


def _message(n: int) -> Message:
    return Message("", "work", Properties(), b"m%d" % n)


def test_a_promoted_member_drops_what_was_sent_ahead_without_telling_the_old_leader() -> None:
    """As ``manager._swap`` retires the stand-in and deletes it: its subscription at the
    old leader is cancelled; no reject, no purge goes there."""
    vhost = memory_broker().catalog.vhosts["/"]
    plane = Plane()
    stand_in = QuorumStandIn(plane, vhost, {"name": "work", "arguments": QUORUM}, "n1")  # type: ignore[arg-type]
    vhost.adopt_queue(stand_in)
    stand_in.consumer_id = 7  # subscribed at the old leader n1
    for n in (1, 2, 3):  # sent ahead, no consumer here had room for them yet
        stand_in.arrived(100 + n, False, _message(n), n)
    assert len(stand_in.ready) == 3
    stand_in.retire()
    vhost.delete_queue(stand_in)
    assert plane.sent == [("cancel", 7)]
    assert stand_in.message_count == 0


def test_a_stand_in_deleted_otherwise_still_gives_back_and_purges_at_its_home() -> None:
    vhost = memory_broker().catalog.vhosts["/"]
    plane = Plane()
    stand_in = QuorumStandIn(plane, vhost, {"name": "work", "arguments": QUORUM}, "n1")  # type: ignore[arg-type]
    vhost.adopt_queue(stand_in)
    stand_in.arrived(101, False, _message(1), 1)
    vhost.delete_queue(stand_in)
    assert ("settle", (f.SettleOp.REJECT, False, 101)) in plane.sent
    assert ("queue_op", f.QueueOpKind.PURGE) in plane.sent


class Sink:
    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def deliver(self, consumer_tag: str, tag: int, redelivered: bool, message: Any) -> None:
        pass

    def consumer_cancelled(self, consumer_tag: str) -> None:
        self.cancelled.append(consumer_tag)

    def close_with(self, error: Any) -> None:
        pass


class Changes(RemoteChanges):
    def __init__(self, broker: Any, factory: Any) -> None:
        self.node = "n1"
        self.broker = broker
        self.catalog = broker.catalog
        self.remote_factory = factory
        self._applying = 0


def test_an_old_leader_ends_a_peers_subscription_instead_of_relaying_it() -> None:
    """The old leader's queue becomes a stand-in for the new leader: its clients'
    consumers move there, but a peer's subscription (the new leader's own former
    stand-in, whose link never went down) is cancelled; moved, it subscribed at the new
    leader for a consumer that no longer exists there and took its backlog."""
    broker = memory_broker()
    vhost = broker.catalog.vhosts["/"]
    queue = QuorumQueue(vhost, "work", durable=True, arguments=dict(QUORUM))
    vhost.adopt_queue(queue)
    sinks = {}
    for protocol, tag in (("cluster", "cluster-n3-1"), ("amqp", "ctag")):
        client = Client(protocol=protocol, peer="p", user=User("guest", ""), vhost=vhost)
        sinks[tag] = Sink()
        session = broker.open_session(client, sinks[tag])  # type: ignore[arg-type]
        session.consume(queue, tag, no_ack=False, exclusive=False, arguments=None)
    plane = Plane()
    made: list[QuorumStandIn] = []

    def factory(vhost: Any, item: Any, home: str) -> QuorumStandIn:
        made.append(QuorumStandIn(plane, vhost, item, home))  # type: ignore[arg-type]
        return made[-1]

    Changes(broker, factory)._put_remote_queue(
        {"name": "work", "vhost": "/", "durable": True, "arguments": QUORUM}, "n3"
    )
    (stand_in,) = made
    assert vhost.queues["work"] is stand_in
    assert [c.tag for c in stand_in.consumers] == ["ctag"]
    assert sinks["cluster-n3-1"].cancelled == ["cluster-n3-1"]
    assert sinks["ctag"].cancelled == []


def test_a_member_being_promoted_refuses_the_old_leaders_late_batch() -> None:
    """Elected with term 12, its group record still being written (``started`` not yet
    run, so its term reads 0): a batch of the old leader's term 11 is refused and that
    leader told of term 12; taken for a newer leader's, it deposed the member being
    promoted (its promotion cancelled, its election key held: no leader at all)."""
    vhost = memory_broker().catalog.vhosts["/"]
    queue = QuorumQueue(vhost, "q", durable=True, arguments=dict(QUORUM))
    rep = Replicator(None, None, queue, "n2", ["n1", "n2", "n3"])  # type: ignore[arg-type]
    rep.elected = 12
    wire = Wire("n1")
    assert fenced_off(rep, wire, batch(11, 5))  # type: ignore[arg-type]
    (ack,) = wire.sent
    assert (ack.term, ack.ok) == (12, False)
    assert not fenced_off(rep, wire, batch(13, 0))  # type: ignore[arg-type]
    assert len(wire.sent) == 1
