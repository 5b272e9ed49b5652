"""Publisher flow control: queues that fill faster than they drain hold their publishers.

A single-threaded broker that reads every publish as fast as the socket delivers it
spends its whole time enqueueing while consumers wait for their turn (2 producers and 4
manual-ack consumers moved ~160 msg/s before this). RabbitMQ avoids that with credit
flow between processes; here each queue has a congestion state with hysteresis:

* a queue becomes *congested* when its ready backlog reaches ``HIGH_MESSAGES`` or
  ``HIGH_BYTES`` while it has consumers (a queue nobody consumes from is a buffer, not a
  bottleneck: memory alarms bound it, as in RabbitMQ), and *uncongested* once the
  backlog is down to ``LOW_MESSAGES`` and ``LOW_BYTES``, or its consumers are gone;
* every ``Publisher`` (an AMQP channel, a STOMP connection) that publishes to a
  congested queue is *held* by it, and told ``on_change(True)`` when its first queue
  holds it and ``on_change(False)`` when the last one lets go. What "hold" means is the
  protocol's business (the AMQP adapter stops reading the socket);
* a queue whose consumers make no progress (no delivery between two ``check_progress``
  calls, e.g. a consumer that stopped acking) is *stalled*: it lets its publishers go
  and holds nobody until its backlog is back down to the low watermark. Publishers
  never wait on a consumer that may never come back, as in RabbitMQ, where a backlog
  alone never blocks a publisher;
* except while a consumer waits only for its own socket to drain (``waits_for_socket``:
  it has credit, but its connection's write buffer is full). A slow auto-ack (QoS 0,
  ``ack:auto``) consumer is paced by its socket, and the kernel's buffers let it go
  seconds without a delivery while megabytes still drain to it: calling its queue
  stalled let the publisher run free and the queue grow without bound. Its progress
  is the bytes it reads, so its queue keeps holding while that wait lasts. A consumer
  whose own connection is not being read (held by flow control or blocked by an
  alarm) is no such evidence: its client may be stuck writing to us and never read
  (one connection publishing to a queue it consumes from), so the rule above applies;
* that wait has a cap (``SOCKET_WAIT_CAP``, ``--flow-socket-wait-cap``): a consumer that
  took no delivery for that long is stalled even while it waits on its own socket. A
  hung process whose TCP connection stays open reads nothing, and would otherwise hold
  its queue's publishers until heartbeats or keepalive end it.

The core knows no protocol: it only calls ``on_change``.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from mypy_extensions import mypyc_attr

if TYPE_CHECKING:
    from roost.core.consumer import Consumer
    from roost.core.queues.base import Queue

log = logging.getLogger("roost.flow")

# Watermarks, per queue. High enough that a burst never pauses anyone and consumers
# always have a backlog to take from; low enough that latency under overload stays in
# the tens of milliseconds (5,000 messages at ~20 k msg/s is ~0.25 s at worst).
HIGH_MESSAGES = 10_000
LOW_MESSAGES = 5_000
HIGH_BYTES = 64 * 1024 * 1024
LOW_BYTES = 32 * 1024 * 1024
# A congested queue that delivered nothing for this long is stalled.
STALL_AFTER = 1.0  # seconds
# ... even while a consumer waits on its own socket, once it took nothing for this long
SOCKET_WAIT_CAP = 60.0  # seconds; 0 = no cap


# compiled (docs/compiled.md); the cluster's stand-in flow subclasses it in interpreted code
@mypyc_attr(allow_interpreted_subclasses=True)
class QueueFlow:
    """One queue's congestion state and the publishers it holds."""

    __slots__ = (
        "_checked",
        "_mark",
        "_moved",
        "_queue",
        "congested",
        "high_bytes",
        "high_messages",
        "low_bytes",
        "low_messages",
        "publishers",
        "stalled",
    )

    def __init__(self, queue: Queue) -> None:
        # weak: a deleted queue is then freed by reference counting (a queue <-> flow
        # cycle waited for a full collection, and exclusive queues come and go with
        # their connections)
        self._queue = weakref.ref(queue)
        self.congested = False
        self.stalled = False
        self.high_messages = HIGH_MESSAGES
        self.low_messages = LOW_MESSAGES
        self.high_bytes = HIGH_BYTES
        self.low_bytes = LOW_BYTES
        # created on the first hold: an empty set costs 216 bytes, and most queues of a
        # broker with 100,000 of them never hold anyone
        self.publishers: set[Publisher] | None = None
        self._mark = -1
        self._checked = 0.0
        self._moved = 0.0  # when a delivery was last seen while congested

    @property
    def queue(self) -> Queue:
        queue = self._queue()
        assert queue is not None  # only the queue itself calls in (or a publisher it holds)
        return queue

    def after_push(self) -> None:
        """Called by the queue when a message joined its backlog."""
        queue = self.queue
        if (
            not self.congested
            and not self.stalled
            and queue.consumers
            and (
                len(queue.ready) >= self.high_messages or queue.ready_bytes >= self.high_bytes
            )
        ):
            self.congested = True
            self._mark = queue.stat_delivered
            self._checked = self._moved = time.monotonic()

    def after_drain(self) -> None:
        """Called by the queue when its backlog shrank or its consumers changed."""
        queue = self.queue
        if not queue.consumers or (
            len(queue.ready) <= self.low_messages and queue.ready_bytes <= self.low_bytes
        ):
            self.stalled = False
            if self.congested:
                self.congested = False
                self.release_all()

    def hold(self, publisher: Publisher) -> None:
        publishers = self.publishers
        if publishers is None:
            publishers = self.publishers = set()
        if publisher not in publishers:
            publishers.add(publisher)
            publisher.held_by(self)

    def release_all(self) -> None:
        publishers, self.publishers = self.publishers, None
        for publisher in publishers or ():
            publisher.released_by(self)

    def check_progress(self, socket_wait_cap: float = SOCKET_WAIT_CAP) -> None:
        """No delivery for ``STALL_AFTER``, or for ``socket_wait_cap`` while a consumer
        waits on its own socket: stop holding publishers (see module doc)."""
        now = time.monotonic()
        if not self.congested or now - self._checked < STALL_AFTER:
            return  # several publishers' watchdogs may ask within one interval
        queue = self.queue
        delivered = queue.stat_delivered
        if delivered != self._mark:
            self._moved = now
        elif not any(waits_for_socket(c) for c in queue.consumers) or (
            socket_wait_cap and now - self._moved >= socket_wait_cap
        ):
            log.info(
                "queue '%s' in vhost '%s' stalled (no delivery for %.0fs with %d ready):"
                " its publishers may go on",
                queue.name, queue.vhost.name, now - self._moved, len(queue.ready),
            )
            self.congested = False
            self.stalled = True
            self.release_all()
        self._mark = delivered
        self._checked = now


class _IdleFlow(QueueFlow):
    """The flow state of every subscription queue without a backlog: never congested,
    holding nobody. A queue whose backlog begins gets a ``QueueFlow`` of its own
    (``Queue._own_flow``, called by ``MessagePath.push``) before anything could congest it.
    A plain attribute, not a property that makes one on demand: the router reads every
    target queue's flow per publish (a seventh of a topic fan-out's server CPU)."""

    __slots__ = ()

    def __init__(self) -> None:  # no queue: nothing here ever reads it
        self.congested = False
        self.stalled = False
        self.publishers = None

    def after_push(self) -> None:  # pragma: no cover - the queue swaps in its own first
        raise RuntimeError("a backlog joined the shared idle flow state")

    def after_drain(self) -> None:
        pass  # nothing queued, nobody held


IDLE_FLOW: Final = _IdleFlow()


def waits_for_socket(consumer: Consumer) -> bool:
    """The consumer would take a delivery now but for its connection's full write
    buffer (the transport's pause_writing), and its connection is read as usual."""
    session = consumer.session
    if session.writable or not session.flow_active or session.closed:
        return False
    client = session.client
    if client.flow_held or client.alarm_state == "blocked":
        return False  # its client may be blocked writing to us, not reading (see above)
    if not consumer.queue.consumer_active(consumer):
        return False  # a single-active-consumer queue's waiting consumer takes nothing
    if consumer.no_ack:
        return True
    if consumer.prefetch and consumer.unacked >= consumer.prefetch:
        return False  # waits for acks too, which may never come
    limit = session.global_prefetch
    return not limit or session.unacked_count < limit


class Publisher:
    """Whoever publishes (an AMQP channel, a STOMP connection): the queues holding it."""

    __slots__ = ("_held", "on_change", "socket_wait_cap")

    def __init__(
        self, on_change: Callable[[bool], None], socket_wait_cap: float = SOCKET_WAIT_CAP
    ) -> None:
        self.on_change = on_change
        self.socket_wait_cap = socket_wait_cap
        self._held: set[QueueFlow] = set()

    @property
    def held(self) -> bool:
        return bool(self._held)

    def held_by(self, flow: QueueFlow) -> None:
        first = not self._held
        self._held.add(flow)
        if first:
            self.on_change(True)

    def released_by(self, flow: QueueFlow) -> None:
        if flow in self._held:
            self._held.discard(flow)
            if not self._held:
                self.on_change(False)

    def check_progress(self) -> None:
        """Let the protocol's watchdog ask every holding queue whether it still moves."""
        for flow in list(self._held):
            flow.check_progress(self.socket_wait_cap)

    def close(self) -> None:
        """The publisher is gone: no queue keeps a reference to it."""
        held, self._held = self._held, set()
        for flow in held:
            if flow.publishers is not None:
                flow.publishers.discard(self)
