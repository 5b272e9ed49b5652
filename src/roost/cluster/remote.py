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
and nacks the publishes still waiting on it; publishes in flight to one queue's home
node are bounded by a window (``WINDOW_HIGH``), whose fullness holds the publishers of
that queue here (each queue its own: one congested queue holds no other's publishers).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.home import Home, credit_for
from roost.cluster.link import frames as f
from roost.cluster.stand_in import RemoteQueue
from roost.cluster.wire import message_cached, message_of, properties_of
from roost.core.errors import BrokerError

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode
    from roost.core.broker import Broker
    from roost.core.message import Message
    from roost.core.queues.base import Queue
    from roost.core.queues.entry import Entry
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.remote")

# publishes forwarded to one queue's home node and not yet answered: at HIGH the
# publishers feeding it are held (as a congested local queue holds them), at LOW they go
# on. Without a window a producer that never waits fills the link faster than the home
# node reads it, and the acks that share the link queue behind seconds of publishes.
GET = -1  # a request that is a basic.get (the others are f.QueueOpKind)
WINDOW_HIGH = 2000
WINDOW_LOW = 1000


class Unreachable(BrokerError):
    pass


class DataPlane:
    """Forwarding, remote subscriptions and the home side, over the node's links."""

    def __init__(self, node: ClusterNode, broker: Broker) -> None:
        self.node = node
        self.broker = broker
        self.home = Home(broker)
        self._next_id = 0
        # publish id -> (the stand-in it went through, Pending operation number, the node
        # it went to: a replicated queue's stand-in may point at a new leader meanwhile)
        self._forwarded: dict[int, tuple[RemoteQueue, int, str]] = {}
        self._subscriptions: dict[int, RemoteQueue] = {}  # consumer id -> stand-in
        self._acks: dict[str, list[int]] = {}  # home node -> delivery ids acked this turn
        self._acks_planned = False
        # request id -> (stand-in, Pending operation number, QueueOpKind or GET)
        self._requests: dict[int, tuple[RemoteQueue, int, int]] = {}
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
        self._forwarded[pid] = (queue, self.broker.pending.issue(), queue.home)
        queue.in_flight += 1
        if queue.in_flight >= WINDOW_HIGH and not queue.window.congested:
            queue.window.set_congested(True)
        link.send_publish(
            pid,
            f.PUBLISH_CONFIRM,
            queue.vhost.name,
            queue.name,
            message.exchange,
            message.routing_key,
            properties_of(message),
            message.body,
        )
        queue.stat_published += 1
        return True

    def _request(self, queue: RemoteQueue, op: int) -> tuple[Link, int] | None:
        """A request to the home node: the replies that follow wait for its answer."""
        link = self.node.links.link(queue.home)
        if link is None:
            return None
        self._next_id += 1
        self._requests[self._next_id] = (queue, self.broker.pending.issue(), op)
        return link, self._next_id

    def get(self, queue: RemoteQueue) -> None:
        found = self._request(queue, GET)
        if found is not None:
            link, rid = found
            link.send(f.Get(rid, queue.vhost.name, queue.name, False))

    def queue_op(self, queue: RemoteQueue, op: f.QueueOpKind) -> None:
        found = self._request(queue, op)
        if found is not None:
            link, rid = found
            link.send(f.QueueOp(rid, op, queue.vhost.name, queue.name))

    def _replied(self, frame: f.GetResult | f.QueueOpResult) -> None:
        """The stand-in takes the home node's figures, then the replies waiting go."""
        found = self._requests.pop(frame.request_id, None)
        if found is None:
            return
        queue, number, op = found
        if isinstance(frame, f.GetResult):
            if frame.found:
                message = message_of(
                    frame.exchange, frame.routing_key, frame.properties, frame.body
                )
                redelivered = bool(frame.flags & f.DELIVER_REDELIVERED)
                queue.fetched(frame.delivery_id, redelivered, message)
            queue.home_ready = frame.message_count
        elif not frame.reply_code:
            queue.home_consumers = frame.consumers
            queue.home_ready = 0 if op == f.QueueOpKind.PURGE else frame.messages
            if op == f.QueueOpKind.PURGE:
                queue.home_purged = frame.messages
        self.broker.pending.finish(number, None)

    def subscribe(self, queue: RemoteQueue) -> None:
        link = self.node.links.link(queue.home)
        if link is None:
            return
        self._next_id += 1
        queue.consumer_id = self._next_id
        self._subscriptions[queue.consumer_id] = queue
        queue.credit = credit_for([c.prefetch for c in queue.consumers])
        wanted = queue.subscribe_arguments  # a replicated stream's consumer: its offset
        raw = json.dumps(wanted).encode() if wanted else b""
        link.send(
            f.Consume(queue.consumer_id, queue.vhost.name, queue.name, "", queue.credit, 0, raw)
        )

    def resize(self, queue: RemoteQueue) -> None:
        """A consumer joined or left here: the subscription's credit follows their prefetch
        (raised at once; lowered too, the home node then sends less until acks catch up)."""
        credit = credit_for([c.prefetch for c in queue.consumers])
        link = self.node.links.link(queue.home)
        if credit != queue.credit and queue.consumer_id and link is not None:
            queue.credit = credit
            link.send(f.Credit(queue.consumer_id, credit))

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
        if op == f.SettleOp.ACK:  # gathered: one Acked frame per home node per loop turn
            acks = self._acks.get(queue.home)
            if acks is None:
                acks = self._acks[queue.home] = []
                if not self._acks_planned:
                    self._acks_planned = True
                    asyncio.get_running_loop().call_soon(self._send_acks)
            acks.append(delivery_id)
            return
        self._send_acks()  # in the order the client settled them
        flags = f.SETTLE_REQUEUE if requeue else 0
        link.send(f.Settle(queue.consumer_id, op, flags, delivery_id))

    def _send_acks(self) -> None:
        self._acks_planned = False
        acks, self._acks = self._acks, {}
        for home, ids in acks.items():
            link = self.node.links.link(home)
            if link is None:
                continue  # the home node requeued them when the link went down
            if len(ids) == 1:
                link.send(f.Settle(0, f.SettleOp.ACK, 0, ids[0]))
            else:
                link.send(f.Acked(f.pack_ids(ids)))

    # -- frames

    def frame(self, link: Link, frame: f.Frame) -> None:
        match frame:
            case f.Batch(frames=frames):  # a run of publishes and deliveries, in order
                self._batch(link, frames)
            case f.Deliver():
                self._deliver(link, frame)
            case f.Publish():
                self.home.publish(link, frame)
            case f.PublishResult(publish_id=pid, outcome=outcome, text=text):
                found = self._forwarded.pop(pid, None)
                if found is not None:
                    self._answered(found[0], 1)
                    error = None if outcome == f.Outcome.CONFIRMED else Unreachable(text)
                    self.broker.pending.finish(found[1], error)
            case f.Confirmed(ids=raw):
                forwarded, finish = self._forwarded, self.broker.pending.finish
                last = None
                for pid in f.unpack_ids(raw):
                    found = forwarded.pop(pid, None)
                    if found is not None:
                        stand_in = found[0]
                        stand_in.in_flight -= 1
                        finish(found[1], None)
                        if stand_in is not last and last is not None:
                            self._answered(last, 0)
                        last = stand_in
                if last is not None:
                    self._answered(last, 0)
            case f.Acked():
                self.home.acked(link, frame)
            case f.Credit():
                self.home.credit(link, frame)
            case f.Settle():
                self.home.settle(link, frame)
            case f.Get():
                self.home.get(link, frame)
            case f.QueueOp():
                self.home.queue_op(link, frame)
            case f.GetResult() | f.QueueOpResult():
                self._replied(frame)
            case f.Consume():
                self.home.consume(link, frame)
            case f.ConsumeOk(consumer_id=cid, numbering=numbering):
                queue = self._subscriptions.get(cid)
                if queue is not None:  # before any delivery of the subscription
                    queue.subscribed(numbering)
            case f.Cancel(consumer_id=cid):
                queue = self._subscriptions.pop(cid, None)
                if queue is not None:  # the home node ended it (queue deleted there)
                    queue.consumer_id = 0
                else:
                    self.home.cancel(link, frame)
            case _:
                pass

    def _batch(self, link: Link, frames: list[f.Publish | f.Deliver]) -> None:
        """Each run of consecutive publishes goes to the home side whole (one durability
        wait for its confirms), deliveries one by one between them."""
        run: list[f.Publish] = []
        for inner in frames:
            if isinstance(inner, f.Deliver):
                if run:
                    self.home.publish_run(link, run)
                    run = []
                self._deliver(link, inner)
            else:
                run.append(inner)
        if run:
            self.home.publish_run(link, run)

    def _deliver(self, link: Link, frame: f.Deliver) -> None:
        queue = self._subscriptions.get(frame.consumer_id)
        if queue is None or queue.deleted:
            cid, did = frame.consumer_id, frame.delivery_id
            link.send(f.Settle(cid, f.SettleOp.REJECT, f.SETTLE_REQUEUE, did))
            return
        message = message_cached(
            queue.properties, frame.exchange, frame.routing_key, frame.properties, frame.body
        )
        redelivered = bool(frame.flags & f.DELIVER_REDELIVERED)
        queue.arrived(frame.delivery_id, redelivered, message, frame.delivery_count)

    @staticmethod
    def _answered(queue: RemoteQueue, count: int) -> None:
        queue.in_flight -= count
        if queue.in_flight <= WINDOW_LOW and queue.window.congested:
            queue.window.set_congested(False)

    def _link_up(self, link: Link) -> None:
        for queue in self._stand_ins(link.peer):
            if queue.consumers and not queue.consumer_id:
                self.subscribe(queue)

    def _link_down(self, link: Link, why: str) -> None:
        peer = link.peer
        self.home.link_down(peer)
        for pid, (stand_in, number, home) in list(self._forwarded.items()):
            if home == peer:
                self._answered(stand_in, 1)
                del self._forwarded[pid]
                self.broker.pending.finish(
                    number, Unreachable(f"link to node '{peer}' lost: {why}")
                )
        for rid, (queue, number, _op) in list(self._requests.items()):
            if queue.home == peer:  # the replies go with what this node knows
                del self._requests[rid]
                self.broker.pending.finish(number, None)
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
        """The stand-ins for queues homed on ``peer``, with a replicated stream's lanes
        (its further subscriptions here, ``stream_standin.py``)."""
        found: list[RemoteQueue] = []
        for vhost in self.broker.catalog.vhosts.values():
            for q in vhost.queues.values():
                if isinstance(q, RemoteQueue) and q.home == peer:
                    found.append(q)
                    found += getattr(q, "lanes", ())
        return found
