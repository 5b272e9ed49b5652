"""A session: what an AMQP channel or a STOMP connection holds in the core.

It owns consumers, delivery tags and the unacknowledged deliveries, applies prefetch
limits, and hands every delivery to its protocol adapter through a ``DeliverySink``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

from roost.core.consumer import NO_ARGUMENTS, Consumer, new_consumer
from roost.core.delivery_sink import CLOSED_SINK, DeliverySink
from roost.core.errors import NotAllowed, PreconditionFailed

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.features.consumer_timeout import AckTimeouts
    from roost.core.latency import Latency
    from roost.core.message import Message
    from roost.core.queues.base import Queue
    from roost.core.queues.entry import Entry


# An unacknowledged delivery: (queue, entry, consumer or None for basic.get).
Unacked = tuple["Queue", "Entry", "Consumer | None"]


def _none_unconfirmed() -> int:
    return 0


class Session:
    def __init__(self, client: Client, sink: DeliverySink) -> None:
        self.client = client
        self.sink = sink
        self.consumers: dict[str, Consumer] = {}
        self.prefetch_count = 0  # basic.qos global=false: applies to consumers created later
        self.global_prefetch = 0  # basic.qos global=true: shared by the session's consumers
        self.unacked_count = 0
        self.flow_active = True  # the client's channel.flow
        self.writable = True  # the transport's back-pressure
        self.can_deliver = True
        self.closed = False
        self.number = 0  # the protocol's channel number, for the management API
        # the channel's mode, as the management API shows it (AMQP confirm.select / tx.select)
        self.confirm = False
        self.transactional = False
        # the adapter's count of publishes not yet confirmed to the client (management)
        self.unconfirmed: Callable[[], int] = _none_unconfirmed
        self._next_tag = 1
        self._unacked: dict[int, Unacked] = {}
        self._order: deque[int] = deque()  # tags in delivery order, acked ones skipped lazily
        # acknowledgement deadlines (core.features.consumer_timeout), set by the broker
        self.ack_timeouts: AckTimeouts | None = None
        # the latency histograms, when they are on (core/latency.py), set by the broker
        self.latency: Latency | None = None
        # tags whose own deadline passed: requeued, yet their consumer's credit stays
        # taken until the client settles them (that late ack or nack does nothing else)
        self._expired: dict[int, Consumer | None] = {}

    # -- flow -----------------------------------------------------------------------------

    def set_flow(self, active: bool) -> None:
        self.flow_active = active
        self._update_can_deliver()

    def set_writable(self, writable: bool) -> None:
        self.writable = writable
        self._update_can_deliver()

    def _update_can_deliver(self) -> None:
        was = self.can_deliver
        self.can_deliver = self.flow_active and self.writable and not self.closed
        if self.can_deliver and not was:
            self._kick()

    def set_qos(self, prefetch_count: int, global_: bool) -> None:
        if global_:
            self.global_prefetch = prefetch_count
        else:
            self.prefetch_count = prefetch_count
        self._kick()

    def _kick(self) -> None:
        """Credit may have appeared: let each queue we consume from dispatch again."""
        for queue in {c.queue for c in self.consumers.values()}:
            queue.dispatch()

    # -- consuming ------------------------------------------------------------------------

    def consume(
        self,
        queue: Queue,
        tag: str,
        *,
        no_ack: bool,
        exclusive: bool,
        arguments: dict[str, Any] | None = None,
    ) -> Consumer:
        if tag in self.consumers:
            raise NotAllowed(f"attempt to reuse consumer tag '{tag}'")
        queue.check_consume(exclusive)
        made = new_consumer(
            self,
            queue,
            tag,
            no_ack=no_ack,
            exclusive=exclusive,
            prefetch=self.prefetch_count,
            arguments=arguments or NO_ARGUMENTS,
        )
        queue.add_consumer(made)  # may refuse (a stream checks its arguments)
        self.consumers[tag] = made
        return made

    def start(self, consumer: Consumer) -> None:
        """Begin deliveries to a consumer registered by ``consume``."""
        if self.consumers.get(consumer.tag) is consumer:
            consumer.queue.dispatch()

    def cancel(self, tag: str) -> bool:
        consumer = self.consumers.pop(tag, None)
        if consumer is None:
            return False
        consumer.queue.remove_consumer(consumer)
        return True

    def consumer_gone(self, consumer: Consumer) -> None:
        """The queue went away under the consumer: forget it and tell the client."""
        if self.consumers.pop(consumer.tag, None) is not None:
            self.sink.consumer_cancelled(consumer.tag)

    def credit_for(self, consumer: Consumer) -> bool:
        """``consumer.has_credit()``; the compiled queue path calls it directly, which
        spares a Python call per delivery (a Consumer is interpreted)."""
        if not self.can_deliver:
            return False
        if consumer.no_ack:
            return True
        prefetch = consumer.prefetch  # (a Python attribute read: once)
        if prefetch and consumer.unacked >= prefetch:
            return False
        limit = self.global_prefetch
        return not limit or self.unacked_count < limit

    def deliver(self, consumer: Consumer, queue: Queue, entry: Entry) -> None:
        tag = self._next_tag
        self._next_tag = tag + 1
        message = entry.message
        assert message is not None  # the queue pages a message in before handing it out
        # each read of a consumer's field is a Python attribute access (an interpreted
        # class): once each
        consumer_tag = consumer.tag
        no_ack = consumer.no_ack
        # a queue records events only while its vhost does (core/events_stream.py): the
        # vhost is asked first, native fields all the way (a session's queues are its
        # client's vhost's), where a queue's ``events`` is a Python attribute read and a
        # subscription queue's a property
        vhost = self.client.vhost
        if vhost.events is not None and (events := queue.events) is not None:
            events.delivered(queue, entry, consumer_tag, no_ack)
        if no_ack:
            self.client.counts.consume_auto_ack += 1
            queue.settle(entry)
        else:
            self.client.counts.consume_manual_ack += 1
            self._unacked[tag] = (queue, entry, consumer)
            self._order.append(tag)
            consumer.unacked += 1
            self.unacked_count += 1
            timeouts = self.ack_timeouts
            if timeouts is not None and (consumer.ack_timeout or message.properties.headers):
                timeouts.delivered(self, tag, consumer.ack_timeout, message)
        self.sink.deliver(consumer_tag, tag, entry.redelivered, message)
        tracer = vhost.tracer
        if tracer is not None:
            tracer.delivered(queue, message, entry.redelivered, self.client, self.number)
        if message.published_at is not None and self.latency is not None:
            self.latency.delivered(message.published_at)

    def deliver_direct(self, consumer_tag: str, message: Message) -> None:
        """A no-ack delivery that belongs to no queue (a direct reply-to reply)."""
        tag = self._next_tag
        self._next_tag = tag + 1
        self.sink.deliver(consumer_tag, tag, False, message)

    def get(self, queue: Queue, no_ack: bool) -> tuple[int, Entry] | None:
        """basic.get: (delivery tag, entry) or None when the queue is empty."""
        entry = queue.take()
        if entry is None:
            return None
        events = queue.events
        if events is not None:
            events.delivered(queue, entry, None, no_ack)
        tag = self._next_tag
        self._next_tag = tag + 1
        message = entry.message
        if message is not None and message.published_at is not None and self.latency:
            self.latency.delivered(message.published_at)
        tracer = queue.vhost.tracer
        if tracer is not None and message is not None:
            tracer.delivered(queue, message, entry.redelivered, self.client, self.number)
        if no_ack:
            self.client.counts.get_auto_ack += 1
            queue.settle(entry)
        else:
            self.client.counts.get_manual_ack += 1
            self._unacked[tag] = (queue, entry, None)
            self._order.append(tag)
            self.unacked_count += 1
            timeouts = self.ack_timeouts
            if timeouts is not None and message is not None and message.properties.headers:
                timeouts.delivered(self, tag, 0.0, message)
        return tag, entry

    # -- settling -------------------------------------------------------------------------

    def _pop(self, tag: int, multiple: bool) -> list[Unacked]:
        unacked = self._unacked
        late = bool(self._expired) and self._settle_expired(tag, multiple)
        if multiple:
            if tag != 0 and tag not in unacked and not late:
                raise PreconditionFailed(f"unknown delivery tag {tag}")
            out: list[Unacked] = []
            order = self._order
            while order and (tag == 0 or order[0] <= tag):
                item = unacked.pop(order.popleft(), None)
                if item is not None:
                    out.append(item)
            return out
        item = unacked.pop(tag, None)
        if item is None:
            if late:
                return []  # its deadline had passed: it was requeued already
            raise PreconditionFailed(f"unknown delivery tag {tag}")
        order = self._order
        if order and order[0] == tag:
            order.popleft()
        elif len(order) > 2 * len(unacked) + 1024:
            # out-of-order acks leave stale tags behind; drop them now and then
            self._order = deque(t for t in order if t in unacked)
        return [item]

    def _release(self, items: list[Unacked]) -> set[Queue]:
        """Return credit for settled deliveries; the queues whose consumers got credit."""
        queues: set[Queue] = set()
        self.unacked_count -= len(items)
        for _queue, _entry, consumer in items:
            if consumer is not None:
                consumer.unacked -= 1
                queues.add(consumer.queue)
        return queues

    def ack(self, tag: int, multiple: bool) -> None:
        if not multiple and self.global_prefetch == 0:
            # One ack per message is the common case (bench scenario 3): settle it without
            # the lists and sets of the general path below.
            item = self._unacked.pop(tag, None)
            if item is not None:
                order = self._order
                if order and order[0] == tag:
                    order.popleft()
                elif len(order) > 2 * len(self._unacked) + 1024:
                    self._order = deque(t for t in order if t in self._unacked)
                queue, entry, consumer = item
                queue.settle(entry)
                if self.client.vhost.events is not None and (events := queue.events) is not None:
                    events.acked(queue, entry)  # (the vhost first, as in deliver)
                self.unacked_count -= 1
                if consumer is not None:
                    consumer.unacked -= 1
                    consumer.queue.dispatch_to(consumer)
                return
        items = self._pop(tag, multiple)
        for queue, entry, _consumer in items:
            queue.settle(entry)
            if queue.events is not None:
                queue.events.acked(queue, entry)
        self._after_settle(items)

    def nack(self, tag: int, multiple: bool, requeue: bool) -> None:
        items = self._pop(tag, multiple)
        for queue, entry, _consumer in items:
            if queue.events is not None:
                queue.events.rejected(queue, entry, requeue)
        if requeue:
            self._requeue(items)
        else:
            for queue, entry, _consumer in items:
                queue.discard(entry)
        self._after_settle(items)

    def _after_settle(self, items: list[Unacked]) -> None:
        queues = self._release(items)
        if self.global_prefetch:
            self._kick()  # channel-wide credit frees every consumer, not just these
        else:
            for queue in queues:
                queue.dispatch()

    def _requeue(self, items: list[Unacked]) -> None:
        by_queue: dict[Queue, list[Entry]] = {}
        for queue, entry, _consumer in items:
            by_queue.setdefault(queue, []).append(entry)
        for queue, entries in by_queue.items():
            queue.requeue(entries)

    def recover(self) -> None:
        """basic.recover: every unacknowledged delivery goes back to its queue."""
        items = list(self._unacked.values())
        self._unacked.clear()
        self._order.clear()
        if self._expired:
            self._forget_expired()
            self._kick()
        self._release(items)
        self._requeue(items)

    def has_unacked(self) -> bool:
        return bool(self._unacked)

    # -- acknowledgement deadlines (core.features.consumer_timeout) ----------------------------

    @property
    def next_tag(self) -> int:
        """Every delivery tag below this one has been handed out."""
        return self._next_tag

    def is_unacked(self, tag: int) -> bool:
        return tag in self._unacked

    def oldest_unacked(self, skip: Container[int] = ()) -> int | None:
        """The earliest delivery still unacknowledged, ignoring the tags in ``skip``."""
        order, unacked = self._order, self._unacked
        while order and order[0] not in unacked:
            order.popleft()
        for tag in order:
            if tag in unacked and tag not in skip:
                return tag
        return None

    def expire(self, tag: int) -> None:
        """A delivery's own deadline passed: back to its queue, for another consumer. The
        consumer keeps that credit slot until the client acks or nacks the tag."""
        item = self._unacked.pop(tag, None)
        if item is None:
            return
        queue, entry, consumer = item
        self._expired[tag] = consumer
        queue.requeue([entry])

    def _settle_expired(self, tag: int, multiple: bool) -> bool:
        """A late ack/nack of expired deliveries returns their credit; True if any."""
        expired = self._expired
        if multiple:
            tags = [t for t in expired if tag == 0 or t <= tag]
        else:
            tags = [tag] if tag in expired else []
        for t in tags:
            self._give_back(expired.pop(t))
        if tags:
            self._kick()
        return bool(tags)

    def _forget_expired(self) -> None:
        for consumer in self._expired.values():
            self._give_back(consumer)
        self._expired.clear()

    def _give_back(self, consumer: Consumer | None) -> None:
        self.unacked_count -= 1
        if consumer is not None:
            consumer.unacked -= 1

    # -- end ------------------------------------------------------------------------------

    def close(self) -> None:
        """Cancel consumers first (so requeued messages go elsewhere), then requeue."""
        if self.closed:
            return
        self.closed = True
        self.can_deliver = False
        for consumer in list(self.consumers.values()):
            self.consumers.pop(consumer.tag, None)
            consumer.queue.remove_consumer(consumer)
        self.recover()
        # the adapter's sink refers to this session: without the cycle both are freed by
        # reference counting when the connection goes, not at the next full collection
        self.sink = CLOSED_SINK
