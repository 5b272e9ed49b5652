"""The home node's side of the data plane: what a node does for its peers as the home of
queues (roost.cluster.remote is the other side).

Each peer is served through one core session per vhost, as a client of its own with the
broker's rights: a remote subscription is a consumer of that session, so prefetch,
requeue on loss and redelivery are the single node's. A peer's forwarded publishes are
pushed into the queues named; the answer (``PublishResult``) goes back at once, after the
fsync for a persistent message to a durable queue, or later while a queue the peer feeds
is congested (the peer is held as a publisher, so its publish window fills and it holds
its own publishers).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.link import frames as f
from roost.cluster.runs import publish_run
from roost.cluster.wire import link_properties_cache, message_cached, properties_of
from roost.core.auth import User
from roost.core.client import Client
from roost.core.errors import BrokerError
from roost.core.exchanges.offsets import OFFSETS_EXCHANGE
from roost.core.flow import Publisher

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.core.broker import Broker
    from roost.core.message import Message
    from roost.core.session import Session
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.home")

# Deliveries a home node sends ahead of the acks of one remote subscription: the
# subscriber asks for a credit sized to its own consumers' prefetch (``credit_for``), and
# raises it (``Credit``) as consumers join. A delivery and its ack make a round trip
# through both nodes' event loops (a few ms to tens of ms under load); 256 bounded one
# queue's relay near 256 per round trip, below what a consumer on the home node takes.
CREDIT = 256  # the least, and what a peer that names none gets
CREDIT_MAX = 4096
CREDIT_PER_PREFETCH = 8  # credit per unit of the local consumers' summed prefetch


def credit_for(prefetches: list[int]) -> int:
    """The credit for a stand-in whose consumers have these prefetch counts (0: none)."""
    if not prefetches or 0 in prefetches:
        return CREDIT_MAX if prefetches else CREDIT
    return max(CREDIT, min(CREDIT_MAX, CREDIT_PER_PREFETCH * sum(prefetches)))


def store_offset(vhost: VHost, queues: list[str], message: Message) -> None:
    """A stream consumer's offset stored on a node that does not lead the stream (its
    stand-in's ``commit_offset``): kept here as a local commit is, when this node still
    leads it (a stand-in here would send it on: during a change of leader it is dropped,
    as RabbitMQ drops a StoreOffset its leader does not take)."""
    queue = vhost.queues.get(queues[0]) if queues else None
    if queue is None or queue.remote or queue.deleted:
        log.info("offset for '%s' dropped: the stream is not led here", queues)
        return
    try:
        vhost.exchanges[OFFSETS_EXCHANGE].route(message)
    except BrokerError as exc:
        log.info("offset for '%s' refused: %s", queues, exc)


class _Sink:
    """The home node's side of one peer's sessions: deliveries become ``Deliver``."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.ids: dict[str, int] = {}  # consumer tag -> the peer's consumer id
        self.session: Session | None = None

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        # the entry's number goes along (``Deliver.delivery_count``, unused otherwise): a
        # replicated queue's members number its messages alike, so the peer can name an
        # acked message to the next leader (cluster/quorum/standin.py)
        held = None if self.session is None else self.session._unacked.get(delivery_tag)
        self.link.send(
            f.Deliver(
                self.ids.get(consumer_tag, 0),
                delivery_tag,
                f.DELIVER_REDELIVERED if redelivered else 0,
                0 if held is None else held[1].seq & 0xFFFFFFFF,
                message.exchange,
                message.routing_key,
                properties_of(message),
                message.body,
            )
        )

    def consumer_cancelled(self, consumer_tag: str) -> None:
        consumer_id = self.ids.pop(consumer_tag, 0)
        if consumer_id:
            self.link.send(f.Cancel(consumer_id, 404, "queue deleted"))

    def close_with(self, error: BrokerError) -> None:
        for tag in list(self.ids):
            self.consumer_cancelled(tag)


class _Peer:
    """A peer as the publisher of one queue here: while the queue is congested, the
    answers to the peer's publishes to it wait, so the peer's window for that queue
    fills and it holds that queue's publishers (and no other queue's)."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.held = False
        self.deferred: list[f.PublishResult] = []
        self.publisher = Publisher(self._changed)
        self._watchdog: Any = None
        # confirms of this loop turn, sent as one Confirmed frame: a forwarded publish
        # otherwise costs the link a PublishResult frame each way's worth of decoding
        self._confirmed: list[int] = []
        self._flush_planned = False
        self.properties = link_properties_cache()  # this peer's publishes to this queue

    def answer(self, result: f.PublishResult) -> None:
        if self.held:
            self.deferred.append(result)
        elif result.outcome == f.Outcome.CONFIRMED:
            self.confirm(result.publish_id)
        else:
            self.flush()  # in the order they were decided
            self.link.send(result)

    def confirm(self, publish_id: int) -> None:
        if self.held:
            self.deferred.append(f.PublishResult(publish_id, f.Outcome.CONFIRMED))
            return
        self._confirmed.append(publish_id)
        if not self._flush_planned:
            self._flush_planned = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_planned = False
        ids = self._confirmed
        if not ids:
            return
        self._confirmed = []
        if len(ids) == 1:
            self.link.send(f.PublishResult(ids[0], f.Outcome.CONFIRMED))
        else:
            self.link.send(f.Confirmed(f.pack_ids(ids)))

    def _changed(self, held: bool) -> None:
        self.held = held
        if held:
            self._watch()
            return
        deferred, self.deferred = self.deferred, []
        for result in deferred:
            self.answer(result)

    def _watch(self) -> None:
        """While held, ask the holding queues about once a second whether they still move
        (a consumer that stopped acking must not hold the peer for ever)."""

        if self._watchdog is None and self.held:
            self._watchdog = asyncio.get_running_loop().call_later(1.0, self._tick)

    def _tick(self) -> None:
        self._watchdog = None
        if self.held:
            self.publisher.check_progress()
            self._watch()

    def close(self) -> None:
        self.publisher.close()
        if self._watchdog is not None:
            self._watchdog.cancel()


class Home:
    """What this node does for its peers as the home of queues."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # (peer, vhost) -> the session serving that peer's subscriptions there
        self.sessions: dict[tuple[str, str], tuple[Session, _Sink]] = {}
        # (peer, vhost, queue) -> that peer as the publisher of that queue
        self.peers: dict[tuple[str, str, str], _Peer] = {}

    def _peer(self, link: Link, frame: f.Publish) -> _Peer:
        key = (link.peer, frame.vhost, frame.queues[0] if frame.queues else "")
        peer = self.peers.get(key)
        if peer is None or peer.link is not link:
            if peer is not None:
                peer.close()
            peer = self.peers[key] = _Peer(link)
        return peer

    def publish(self, link: Link, frame: f.Publish) -> None:
        peer = self._peer(link, frame)

        def answer(outcome: f.Outcome, text: str = "") -> None:
            if not frame.publish_id:
                return
            if outcome == f.Outcome.CONFIRMED:
                peer.confirm(frame.publish_id)
            else:
                peer.answer(f.PublishResult(frame.publish_id, outcome, text))

        vhost = self.broker.catalog.vhosts.get(frame.vhost)
        message = message_cached(
            peer.properties, frame.exchange, frame.routing_key, frame.properties, frame.body
        )
        if frame.exchange == OFFSETS_EXCHANGE and vhost is not None:
            store_offset(vhost, frame.queues, message)
            return
        done = self.broker.durable_from_here()  # the store, and a quorum queue's majority
        taken = 0
        for name in frame.queues:
            queue = None if vhost is None else vhost.queues.get(name)
            if queue is None or queue.remote or queue.deleted:
                continue
            if not queue.push(message):
                answer(f.Outcome.NACKED, queue.refusal)
                return
            taken += 1
            if queue.flow.congested:
                queue.flow.hold(peer.publisher)
        if not taken:
            answer(f.Outcome.UNROUTABLE, "no such queue on its home node")
        elif not done.then(
            lambda error: answer(
                f.Outcome.CONFIRMED if error is None else f.Outcome.NACKED, str(error or "")
            )
        ):
            answer(f.Outcome.CONFIRMED)

    def publish_run(self, link: Link, frames: list[f.Publish]) -> None:
        """A Batch's publishes, in order (``roost.cluster.runs``)."""
        publish_run(self, link, frames)

    def _session(self, link: Link, vhost: VHost) -> tuple[Session, _Sink]:
        key = (link.peer, vhost.name)
        found = self.sessions.get(key)
        if found is not None and found[1].link is link:
            return found
        client = Client(
            protocol="cluster", peer=link.peer, user=User("rmq-internal", ""), vhost=vhost
        )
        sink = _Sink(link)
        session = self.broker.open_session(client, sink)
        sink.session = session
        session.set_qos(CREDIT, False)
        self.sessions[key] = (session, sink)
        return session, sink

    def consume(self, link: Link, frame: f.Consume) -> None:
        vhost = self.broker.catalog.vhosts.get(frame.vhost)
        queue = None if vhost is None else vhost.queues.get(frame.queue)
        if vhost is None or queue is None or queue.remote:
            link.send(f.Cancel(frame.consumer_id, 404, f"no queue '{frame.queue}' here"))
            return
        session, sink = self._session(link, vhost)
        tag = f"cluster-{link.peer}-{frame.consumer_id}"
        session.set_qos(min(frame.prefetch, CREDIT_MAX) or CREDIT, False)
        try:
            arguments = json.loads(frame.arguments) if frame.arguments else None
            consumer = session.consume(
                queue, tag, no_ack=False, exclusive=False, arguments=arguments
            )
        except BrokerError as exc:
            link.send(f.Cancel(frame.consumer_id, 403, str(exc)))
            return
        sink.ids[tag] = frame.consumer_id
        link.send(f.ConsumeOk(frame.consumer_id, getattr(queue, "numbering", 0)))
        session.start(consumer)

    def cancel(self, link: Link, frame: f.Cancel) -> None:
        for session, sink in self._of(link):
            tag = f"cluster-{link.peer}-{frame.consumer_id}"
            if sink.ids.pop(tag, None) is not None:
                session.cancel(tag)

    def credit(self, link: Link, frame: f.Credit) -> None:
        """The subscriber's consumers changed: its subscription's prefetch follows."""
        tag = f"cluster-{link.peer}-{frame.consumer_id}"
        for session, sink in self._of(link):
            consumer = session.consumers.get(tag) if tag in sink.ids else None
            if consumer is not None:
                consumer.prefetch = min(frame.credit, CREDIT_MAX) or CREDIT
                consumer.queue.dispatch()
                return

    def acked(self, link: Link, frame: f.Acked) -> None:
        sessions = [session for session, _sink in self._of(link)]
        for delivery_id in f.unpack_ids(frame.ids):
            for session in sessions:
                if session.is_unacked(delivery_id):
                    session.ack(delivery_id, False)
                    break

    def settle(self, link: Link, frame: f.Settle) -> None:
        requeue = bool(frame.flags & f.SETTLE_REQUEUE)
        for session, _sink in self._of(link):
            if not session.is_unacked(frame.delivery_id):
                continue
            if frame.op == f.SettleOp.ACK:
                session.ack(frame.delivery_id, False)
            else:
                session.nack(frame.delivery_id, False, requeue)
            return

    def get(self, link: Link, frame: f.Get) -> None:
        """basic.get for a client on the peer: the message stays unacked here, in the
        peer's session, until the peer settles it (``Settle`` with its delivery tag)."""
        vhost = self.broker.catalog.vhosts.get(frame.vhost)
        queue = None if vhost is None else vhost.queues.get(frame.queue)
        if vhost is None or queue is None or queue.remote:
            link.send(f.GetResult(frame.request_id, False, reply_code=404))
            return
        session, _sink = self._session(link, vhost)
        got = session.get(queue, False)
        if got is None:
            link.send(f.GetResult(frame.request_id, False))
            return
        tag, entry = got
        message = entry.message
        assert message is not None  # Queue.take pages it in
        link.send(
            f.GetResult(
                frame.request_id,
                True,
                tag,
                f.DELIVER_REDELIVERED if entry.redelivered else 0,
                queue.message_count,
                0,
                message.exchange,
                message.routing_key,
                properties_of(message),
                message.body,
            )
        )

    def queue_op(self, link: Link, frame: f.QueueOp) -> None:
        vhost = self.broker.catalog.vhosts.get(frame.vhost)
        queue = None if vhost is None else vhost.queues.get(frame.queue)
        if queue is None or queue.remote:
            link.send(f.QueueOpResult(frame.request_id, 404, 0, 0, "no such queue"))
            return
        count = queue.purge() if frame.op == f.QueueOpKind.PURGE else queue.message_count
        link.send(f.QueueOpResult(frame.request_id, 0, count, len(queue.consumers)))

    def _of(self, link: Link) -> list[tuple[Session, _Sink]]:
        return [s for (peer, _), s in self.sessions.items() if peer == link.peer]

    def link_down(self, peer: str) -> None:
        """The peer's subscriptions end; what it had not acked is requeued here."""
        for gone in [k for k in self.peers if k[0] == peer]:
            self.peers.pop(gone).close()
        for key in [k for k in self.sessions if k[0] == peer]:
            session, _sink = self.sessions.pop(key)
            self.broker.close_session(session)
