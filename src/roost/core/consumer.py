"""A consumer: a subscription of one session to one queue, with its credit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.core.features.consumer_timeout import ACK_TIMEOUT, seconds

if TYPE_CHECKING:
    from roost.core.queues.base import Queue
    from roost.core.session import Session


# the arguments of a consumer or queue declared without any: one shared dict (an empty
# one each is 64 bytes, 6 MB for 100,000 STOMP subscriptions); nothing may add to it
NO_ARGUMENTS: dict[str, Any] = {}


_NO_SLOTS: tuple[str, ...] = ()


class Consumer:
    """What deliveries and credit read of a consumer: a subscription of one session to one
    queue. It keeps nothing itself (no slots), so that a queue can be its own consumer
    (``SubscriptionQueue``: one object for a transient topic subscription, no consumer
    and no consumer list of its own). ``PlainConsumer`` is a consumer without options and
    without acks or a prefetch: most of them (100,000 STOMP ack:auto topic subscriptions
    are common), so what only those change is read from the class, 48 bytes less each. A
    consumer that acks or has a prefetch is an ``AckingConsumer``; one with options
    (exclusive, arguments) a ``ConsumerWithOptions``; ``new_consumer`` makes the right
    one."""

    # (a name, not a literal, so that mypy lets the core write prefetch and unacked
    # on a Consumer: only an AckingConsumer's are written, new_consumer sees to that)
    __slots__ = _NO_SLOTS
    session: Session
    queue: Queue
    tag: str
    no_ack: bool
    # 0 = unlimited (RabbitMQ's per-consumer basic.qos)
    prefetch: int = 0
    # deliveries not yet acknowledged (a no_ack consumer's deliveries are settled at once)
    unacked: int = 0
    exclusive: bool = False
    arguments: dict[str, Any] = NO_ARGUMENTS
    priority: int = 0
    # the default deadline of this consumer's deliveries, in seconds (0: none)
    ack_timeout: float = 0.0

    def has_credit(self) -> bool:
        return self.session.credit_for(self)

    def is_exclusive(self) -> bool:
        """basic.consume's exclusive flag (read through this: a queue that is its own
        consumer is an exclusive queue, not an exclusive consumer)."""
        return self.exclusive

    def __repr__(self) -> str:
        return f"<Consumer {self.tag!r} on {self.queue.name!r}>"


class PlainConsumer(Consumer):
    __slots__ = ("no_ack", "queue", "session", "tag")

    def __init__(self, session: Session, queue: Queue, tag: str, *, no_ack: bool) -> None:
        self.session = session
        self.queue = queue
        self.tag = tag
        self.no_ack = no_ack


class AckingConsumer(PlainConsumer):
    __slots__ = ("prefetch", "unacked")

    def __init__(
        self, session: Session, queue: Queue, tag: str, *, no_ack: bool, prefetch: int
    ) -> None:
        super().__init__(session, queue, tag, no_ack=no_ack)
        self.prefetch = prefetch
        self.unacked = 0


class ConsumerWithOptions(AckingConsumer):
    __slots__ = ("ack_timeout", "arguments", "exclusive", "priority")

    def __init__(
        self,
        session: Session,
        queue: Queue,
        tag: str,
        *,
        no_ack: bool,
        exclusive: bool,
        prefetch: int,
        arguments: dict[str, Any],
    ) -> None:
        super().__init__(session, queue, tag, no_ack=no_ack, prefetch=prefetch)
        self.exclusive = exclusive
        self.arguments = arguments
        priority = arguments.get("x-priority", 0)
        self.priority = priority if isinstance(priority, int) else 0
        self.ack_timeout = seconds(arguments.get(ACK_TIMEOUT))


def new_consumer(
    session: Session,
    queue: Queue,
    tag: str,
    *,
    no_ack: bool,
    exclusive: bool,
    prefetch: int,
    arguments: dict[str, Any],
) -> Consumer:
    """A ``PlainConsumer`` (or the queue itself, when it is made to be its own consumer);
    an ``AckingConsumer`` when it acks or has a prefetch; a ``ConsumerWithOptions`` when
    it is exclusive or has arguments."""
    if exclusive or arguments:
        return ConsumerWithOptions(
            session,
            queue,
            tag,
            no_ack=no_ack,
            exclusive=exclusive,
            prefetch=prefetch,
            arguments=arguments,
        )
    if no_ack and not prefetch:
        # a queue made for one transient subscriber is its own consumer
        itself = queue.consumed_by_itself(session, tag)
        if itself is not None:
            return itself
        return PlainConsumer(session, queue, tag, no_ack=no_ack)
    return AckingConsumer(session, queue, tag, no_ack=no_ack, prefetch=prefetch)
