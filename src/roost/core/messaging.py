"""Publishing, getting and consuming on behalf of a client: the message half of the
adapter port (core/ports/adapter.py). Rights are checked here (core/access.py); routing
happens in the vhost, queueing in the queues; a publisher confirm waits for the group
commit when the message was written durably.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core.client import size_bucket
from roost.core.completion import Completion
from roost.core.errors import NotImplementedFeature
from roost.core.exchanges.offsets import OFFSETS_EXCHANGE, target_stream
from roost.core.exchanges.producers import PRODUCERS_EXCHANGE
from roost.core.exchanges.producers import answer as answer_producer_query
from roost.core.features.direct_reply import REPLY_TO
from roost.core.features.ttl import parse_expiration
from roost.core.flow import SOCKET_WAIT_CAP, Publisher

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.completion import Pending
    from roost.core.consumer import Consumer
    from roost.core.durability import MessageStore
    from roost.core.latency import Latency
    from roost.core.message import Message
    from roost.core.queues.entry import Entry
    from roost.core.quotas import Quotas
    from roost.core.session import Session


class Messaging:
    def __init__(
        self,
        quotas: Quotas,
        store: MessageStore,
        pending: Pending,
        latency: Latency | None,
        socket_wait_cap: float = SOCKET_WAIT_CAP,
    ) -> None:
        self._socket_wait_cap = socket_wait_cap  # core/flow.py
        self._quotas = quotas
        self._store = store
        self._pending = pending
        self._latency = latency
        # a cluster node's "my definitions are older than a peer's" (cluster/definitions.py):
        # a publish that routed nowhere then is nacked, not confirmed unroutable
        self.behind: Callable[[], bool] | None = None

    def publish(
        self,
        client: Client,
        exchange: str,
        message: Message,
        confirm: Callable[[bool], None] | None = None,
        publisher: Publisher | None = None,
        *,
        refused: Callable[[str], None] | None = None,
        channel: int = 0,
    ) -> int:
        """Route and enqueue; returns how many queues took the message.

        ``confirm(ok)`` is called once the message is safe: at once, unless it was written
        to a durable queue's store, then after the group commit that puts it on disk.
        ``refused(reason)`` is called first when a queue or exchange refused the message
        (overflow reject-publish, a mutator): ``confirm(False)`` follows at once.
        ``publisher`` (from ``new_publisher``) is held while a queue it reached is
        congested. ``channel``: the protocol's channel number, for the firehose."""
        if len(message.body) > self._quotas.max_message_size:  # inline: the hot path
            self._quotas.check_message_size(len(message.body))
        access = client.access
        if access is not None:
            access.check_publish(exchange, message, client.vhost.exchanges)
        if exchange.startswith("amq.roost."):  # Roost's own: a query or an offset commit
            if exchange == PRODUCERS_EXCHANGE:  # answered here: it needs the rights
                return self._answer_producer_query(client, message, confirm)
            if exchange == OFFSETS_EXCHANGE and access is not None:
                access.check("read", "queue", target_stream(message))
        if message.properties.expiration is not None:
            parse_expiration(message.properties.expiration)  # refused before routing
        tracer = client.vhost.tracer
        if tracer is not None:  # the firehose is on: its copy names the publisher
            tracer.publishing(client, channel, message)
        counts = client.counts
        counts.received += 1
        size = len(message.body)
        counts.sizes[0 if size <= 100 else 1 if size <= 1000 else size_bucket(size)] += 1
        counts.size_sum += size
        latency = self._latency
        if latency is not None and (now := latency.stamp()) is not None:
            message.published_at = now
            if confirm is not None:
                confirm = latency.timed_confirm(now, confirm)
        if confirm is None:
            routed, refusal = client.vhost.publish(exchange, message, publisher)
            if refusal and refused is not None:
                refused(refusal)
            if not routed:
                counts.unroutable += 1
            return routed
        counts.confirm_received += 1
        store = self._store
        # a persistent message to a durable queue, or any message to a stream, bumps
        # ``appends``: its confirm waits for the group commit's fsync
        before = store.appends
        pending = self._pending
        forwarded = pending.issued  # a cluster's queues on other nodes confirm later
        routed, refusal = client.vhost.publish(exchange, message, publisher)
        if not routed:
            counts.unroutable += 1
            behind = self.behind
            if behind is not None and behind():  # routed by bindings known to be old
                refusal = "this node has not applied the cluster's latest definitions yet"
        if refusal:  # a full queue with overflow reject-publish, a mutator: nack at once
            if refused is not None:
                refused(refusal)
            confirm(False)
        elif pending.issued != forwarded:
            Completion(store, pending, marks=(before, forwarded)).then(
                lambda error: confirm(error is None)
            )
        elif store.appends != before:
            store.when_durable(confirm)
        else:
            confirm(True)
        return routed

    @staticmethod
    def _answer_producer_query(
        client: Client, message: Message, confirm: Callable[[bool], None] | None
    ) -> int:
        """amq.roost.producers (core/exchanges/producers.py): the reply goes out now; the
        request itself reaches no queue (0), like an offset commit."""
        vhost = client.vhost
        vhost.exchange(PRODUCERS_EXCHANGE).stat_in += 1
        answer_producer_query(vhost, client.access, message)
        if confirm is not None:
            confirm(True)
        return 0

    def direct_reply_request(self, session: Session, message: Message) -> Message:
        """A request published with ``reply_to = DIRECT_REPLY_TO``: the copy whose
        reply_to names this session's reply consumer (PreconditionFailed without one)."""
        return session.client.vhost.replies.request(session, message)

    def new_publisher(self, on_change: Callable[[bool], None]) -> Publisher:
        """Flow control for one publishing session: ``on_change(True)`` when a congested
        queue wants it to stop, ``on_change(False)`` when it may go on (core/flow.py).
        Call ``check_progress()`` about once a second while held, ``close()`` at the end."""
        return Publisher(on_change, self._socket_wait_cap)

    def prepare_get(self, session: Session, name: str) -> None:
        """basic.get's checks (NotFound, 403, 405) before the reply waits; a cluster's
        queue homed on another node fetches a message from there (``Queue.fetch``)."""
        access = session.client.access
        if access is not None:
            access.check("read", "queue", name)
        session.client.vhost.queue(name, session.client).fetch()

    def get(self, session: Session, name: str, no_ack: bool) -> tuple[int, Entry, int] | None:
        """basic.get: (delivery tag, entry, messages left) or None when empty."""
        access = session.client.access
        if access is not None:
            access.check("read", "queue", name)
        queue = session.client.vhost.queue(name, session.client)
        got = session.get(queue, no_ack)
        if got is None:
            session.client.counts.get_empty += 1
            return None
        return got[0], got[1], queue.message_count

    def consume(
        self,
        session: Session,
        name: str,
        tag: str,
        *,
        no_ack: bool,
        exclusive: bool,
        arguments: dict[str, Any] | None = None,
    ) -> Consumer:
        """Register a consumer; call ``session.start(consumer)`` to begin deliveries."""
        if name == REPLY_TO:
            return session.client.vhost.replies.consume(session, tag, no_ack=no_ack)
        access = session.client.access
        if access is not None:
            access.check("read", "queue", name)
        self._quotas.check_consumer_limit(len(session.consumers))
        queue = session.client.vhost.queue(name, session.client)
        if queue.kind == "quorum" and session.global_prefetch:  # RabbitMQ 3.10: 540
            raise NotImplementedFeature(
                f"queue '{name}' in vhost '{queue.vhost.name}' does not support global qos"
            )
        return session.consume(queue, tag, no_ack=no_ack, exclusive=exclusive, arguments=arguments)

    def check_publish(self, client: Client, exchange: str, message: Message) -> None:
        """What ``publish`` checks before routing: rights (AccessRefused, or
        PreconditionFailed for a foreign user-id), then that the exchange exists
        (NotFound). A transaction checks its publishes when they arrive."""
        self._quotas.check_message_size(len(message.body))
        access = client.access
        if access is not None:
            access.check_publish(exchange, message, client.vhost.exchanges)
        client.vhost.exchange(exchange)
