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


class Consumer:
    __slots__ = (
        "ack_timeout",
        "arguments",
        "exclusive",
        "no_ack",
        "prefetch",
        "priority",
        "queue",
        "session",
        "tag",
        "unacked",
    )

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
        self.session = session
        self.queue = queue
        self.tag = tag
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.prefetch = prefetch  # 0 = unlimited (RabbitMQ's per-consumer basic.qos)
        self.arguments = arguments
        priority = arguments.get("x-priority", 0)
        self.priority = priority if isinstance(priority, int) else 0
        self.unacked = 0
        # the default deadline of this consumer's deliveries, in seconds (0: none)
        self.ack_timeout = seconds(arguments.get(ACK_TIMEOUT))

    def has_credit(self) -> bool:
        session = self.session
        if not session.can_deliver:
            return False
        if self.no_ack:
            return True
        if self.prefetch and self.unacked >= self.prefetch:
            return False
        limit = session.global_prefetch
        return not limit or session.unacked_count < limit

    def __repr__(self) -> str:
        return f"<Consumer {self.tag!r} on {self.queue.name!r}>"
