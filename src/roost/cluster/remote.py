"""Any node serves any client: queues homed on other nodes, reached over the links.

A queue lives on one node, its home (the node whose client declared it). Every other
node holds a ``RemoteQueue`` for it, made from its etcd declaration, which routing and
consumers use like any queue:

- ``push`` (a publish routed to it here) sends a ``Publish`` to the home node and issues
  a ``Pending`` operation: the publisher's confirm waits for the home node's
  ``PublishResult`` (after its fsync for a persistent message to a durable queue), and a
  home node out of reach nacks it;
- the first consumer here subscribes at the home node (``Consume`` with a credit of
  ``CREDIT`` messages); the home node delivers into this stand-in (``Deliver``), which
  dispatches to its own consumers with their prefetch as any queue does, and their
  acks, rejects and requeues go back as ``Settle``; when the last consumer here leaves,
  the subscription is cancelled and what was not handed out goes back.

The home node's side is ``roost.cluster.home``. A link that goes down closes the
sessions the home node kept for that peer (their unacked messages are requeued there)
and nacks the publishes still waiting on it; publishes in flight to one home node are
bounded by a window (``WINDOW_HIGH``), whose fullness holds the publishers here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.home import CREDIT, Home
from roost.cluster.link import frames as f
from roost.cluster.wire import message_of, properties_of
from roost.core.errors import BrokerError, NotFound
from roost.core.flow import QueueFlow
from roost.core.queues.base import Queue
from roost.core.queues.entry import Entry

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode
    from roost.core.broker import Broker
    from roost.core.consumer import Consumer
    from roost.core.message import Message
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.remote")

# publishes forwarded to one home node and not yet answered: at HIGH the publishers
# feeding its queues are held (as a congested local queue holds them), at LOW they go
# on. Without a window a producer that never waits fills the link faster than the home
# node reads it, and the acks that share the link queue behind seconds of publishes.
WINDOW_HIGH = 2000
WINDOW_LOW = 1000


class Unreachable(BrokerError):
    pass


class RemoteEntry(Entry):
    """An entry the home node delivered: settling it settles ``delivery_id`` there."""

    __slots__ = ("delivery_id",)

    def __init__(self, seq: int, message: Message, delivery_id: int) -> None:
        super().__init__(seq, message)
        self.delivery_id = delivery_id


class RemoteFlow(QueueFlow):
    """A stand-in is congested while its home node's publish window is full; its own
    backlog (what the home node sent ahead) never holds anyone."""

    __slots__ = ()

    def after_push(self) -> None:
        pass

    def after_drain(self) -> None:
        pass

    def check_progress(self) -> None:
        pass  # the window moves with the home node's answers, not with deliveries here

    def set_congested(self, congested: bool) -> None:
        self.congested = congested
        if not congested:
            self.release_all()


class RemoteQueue(Queue):
    """This node's stand-in for a queue homed on ``home``."""

    remote = True

    def __init__(self, plane: DataPlane, vhost: VHost, item: dict[str, Any], home: str) -> None:
        super().__init__(
            vhost,
            item["name"],
            durable=bool(item.get("durable")),
            auto_delete=bool(item.get("auto_delete")),
            arguments=dict(item.get("arguments") or {}),
        )
        self.plane = plane
        self.home = home
        self.consumer_id = 0  # our subscription at the home node; 0: none
        self.window = RemoteFlow(self)
        self.flow = self.window

    # -- publishing: to the home node

    def push(self, message: Message) -> bool:
        return self.plane.forward(self, message)

    # -- deliveries from the home node

    def arrived(self, delivery_id: int, redelivered: bool, message: Message) -> None:
        self._seq += 1
        entry = RemoteEntry(self._seq, message, delivery_id)
        entry.redelivered = redelivered
        if self.ready or not self._offer(entry):
            self._own_ready().append(entry)
            self.ready_bytes += entry.size

    def settle(self, entry: Entry) -> None:
        self.unacked -= 1
        self.stat_acked += 1
        self.plane.settle(self, entry, f.SettleOp.ACK, requeue=False)

    def discard(self, entry: Entry) -> None:
        self.unacked -= 1
        self.plane.settle(self, entry, f.SettleOp.REJECT, requeue=False)

    def requeue(self, entries: Any) -> None:
        for entry in entries:  # the home node puts them back in their place
            self.unacked -= 1
            self.plane.settle(self, entry, f.SettleOp.REJECT, requeue=True)

    def purge(self) -> int:
        count = len(self.ready)
        self._give_back(requeue=False)
        return count

    def _give_back(self, *, requeue: bool) -> None:
        for entry in self.ready:
            self.plane.settle(self, entry, f.SettleOp.REJECT, requeue=requeue)
        self.ready.clear()
        self.ready_bytes = 0

    def lost_home(self) -> None:
        """The link to the home node went down: what it sent ahead is requeued there."""
        self.consumer_id = 0
        self.ready.clear()
        self.ready_bytes = 0

    # -- consumers

    def check_available(self) -> None:
        if not self.plane.reachable(self.home):
            kind = "durable queue" if self.durable else "queue"  # RabbitMQ's words
            raise NotFound(
                f"home node '{self.home}' of {kind} '{self.name}' in vhost "
                f"'{self.vhost.name}' is down or inaccessible"
            )

    def add_consumer(self, consumer: Consumer) -> None:
        super().add_consumer(consumer)
        if not self.consumer_id:
            self.plane.subscribe(self)

    def remove_consumer(self, consumer: Consumer) -> None:
        """No auto-delete here: the home node counts this node as one consumer."""
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        if not self.consumers and self.consumer_id:
            self._give_back(requeue=True)
            self.plane.unsubscribe(self)
        elif self.consumers:
            self.dispatch()


class DataPlane:
    """Forwarding, remote subscriptions and the home side, over the node's links."""

    def __init__(self, node: ClusterNode, broker: Broker) -> None:
        self.node = node
        self.broker = broker
        self.home = Home(broker)
        self._next_id = 0
        # publish id -> (home node, Pending operation number)
        self._forwarded: dict[int, tuple[str, int]] = {}
        self._in_flight: dict[str, int] = {}  # home node -> publishes not yet answered
        self._full: set[str] = set()  # home nodes whose window is full
        self._subscriptions: dict[int, RemoteQueue] = {}  # consumer id -> stand-in
        node.frame_handlers.append(self.frame)
        node.link_up.append(self._link_up)
        node.link_down.append(self._link_down)
        node.node_down.append(self._node_down)

    def make_queue(self, vhost: VHost, item: dict[str, Any], home: str) -> Queue:
        return RemoteQueue(self, vhost, item, home)

    def reachable(self, node: str) -> bool:
        return self.node.links.link(node) is not None

    # -- the client's node

    def forward(self, queue: RemoteQueue, message: Message) -> bool:
        link = self.node.links.link(queue.home)
        if link is None:
            queue.refusal = (
                f"home node '{queue.home}' of queue '{queue.name}' in vhost "
                f"'{queue.vhost.name}' is down or inaccessible"
            )
            return False
        self._next_id += 1
        pid = self._next_id
        home = queue.home
        self._forwarded[pid] = (home, self.broker.pending.issue())
        in_flight = self._in_flight[home] = self._in_flight.get(home, 0) + 1
        if in_flight >= WINDOW_HIGH and home not in self._full:
            self._full.add(home)
            for stand_in in self._stand_ins(home):
                stand_in.window.set_congested(True)
        link.send(
            f.Publish(
                pid,
                f.PUBLISH_CONFIRM,
                queue.vhost.name,
                [queue.name],
                message.exchange,
                message.routing_key,
                properties_of(message),
                message.body,
            )
        )
        queue.stat_published += 1
        return True

    def subscribe(self, queue: RemoteQueue) -> None:
        link = self.node.links.link(queue.home)
        if link is None:
            return
        self._next_id += 1
        queue.consumer_id = self._next_id
        self._subscriptions[queue.consumer_id] = queue
        link.send(f.Consume(queue.consumer_id, queue.vhost.name, queue.name, "", CREDIT))

    def unsubscribe(self, queue: RemoteQueue) -> None:
        consumer_id, queue.consumer_id = queue.consumer_id, 0
        self._subscriptions.pop(consumer_id, None)
        link = self.node.links.link(queue.home)
        if link is not None and consumer_id:
            link.send(f.Cancel(consumer_id))

    def settle(self, queue: RemoteQueue, entry: Entry, op: f.SettleOp, *, requeue: bool) -> None:
        delivery_id = getattr(entry, "delivery_id", 0)
        link = self.node.links.link(queue.home)
        if link is None or not delivery_id:
            return  # the home node requeued it when the link went down
        flags = f.SETTLE_REQUEUE if requeue else 0
        link.send(f.Settle(queue.consumer_id, op, flags, delivery_id))

    # -- frames

    def frame(self, link: Link, frame: f.Frame) -> None:
        match frame:
            case f.Publish():
                self.home.publish(link, frame)
            case f.PublishResult(publish_id=pid, outcome=outcome, text=text):
                found = self._forwarded.pop(pid, None)
                if found is not None:
                    self._answered(found[0])
                    error = None if outcome == f.Outcome.CONFIRMED else Unreachable(text)
                    self.broker.pending.finish(found[1], error)
            case f.Deliver():
                queue = self._subscriptions.get(frame.consumer_id)
                if queue is None or queue.deleted:
                    back = f.Settle(
                        frame.consumer_id, f.SettleOp.REJECT, f.SETTLE_REQUEUE, frame.delivery_id
                    )
                    link.send(back)
                    return
                message = message_of(
                    frame.exchange, frame.routing_key, frame.properties, frame.body
                )
                redelivered = bool(frame.flags & f.DELIVER_REDELIVERED)
                queue.arrived(frame.delivery_id, redelivered, message)
            case f.Settle():
                self.home.settle(link, frame)
            case f.Consume():
                self.home.consume(link, frame)
            case f.Cancel(consumer_id=cid):
                queue = self._subscriptions.pop(cid, None)
                if queue is not None:  # the home node ended it (queue deleted there)
                    queue.consumer_id = 0
                else:
                    self.home.cancel(link, frame)
            case _:
                pass

    def _answered(self, home: str, count: int = 1) -> None:
        left = self._in_flight[home] = self._in_flight.get(home, count) - count
        if left <= WINDOW_LOW and home in self._full:
            self._full.discard(home)
            for stand_in in self._stand_ins(home):
                stand_in.window.set_congested(False)

    def _link_up(self, link: Link) -> None:
        for queue in self._stand_ins(link.peer):
            if queue.consumers and not queue.consumer_id:
                self.subscribe(queue)

    def _link_down(self, link: Link, why: str) -> None:
        peer = link.peer
        self.home.link_down(peer)
        for pid, (home, number) in list(self._forwarded.items()):
            if home == peer:
                del self._forwarded[pid]
                self.broker.pending.finish(
                    number, Unreachable(f"link to node '{peer}' lost: {why}")
                )
        self._in_flight[peer] = 0
        self._answered(peer, 0)
        for queue in self._stand_ins(peer):
            self._subscriptions.pop(queue.consumer_id, None)
            queue.lost_home()

    def _node_down(self, peer: str) -> None:
        """The home node is gone (its lease expired): consumers of its queues here are
        cancelled (basic.cancel), as RabbitMQ does when a classic queue's node goes."""
        for queue in self._stand_ins(peer):
            if getattr(queue, "survives_home", False):
                continue  # a replicated queue: another member takes over (cluster.quorum)
            for consumer in list(queue.consumers):
                queue.consumers.remove(consumer)
                consumer.session.consumer_gone(consumer)

    def _stand_ins(self, peer: str) -> list[RemoteQueue]:
        return [
            q
            for vhost in self.broker.catalog.vhosts.values()
            for q in vhost.queues.values()
            if isinstance(q, RemoteQueue) and q.home == peer
        ]
