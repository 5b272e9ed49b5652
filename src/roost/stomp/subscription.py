"""What a STOMP session keeps per subscription."""

from __future__ import annotations

from typing import Final

# what an ack:auto subscription has outstanding: always nothing, so all of them share
# this one (nothing is ever added to it: deliver records tags only for client acks)
NONE_OUTSTANDING: Final[dict[int, None]] = {}


class Subscription:
    """Only what deliveries and acks read: its queue, ack-timeout and consumer arguments
    went to the core with its consumer (``Session.consumers[id]``), 8 bytes a field.

    An ack:auto subscription to a topic or queue (most of them: 100,000 are common,
    bench/rss_bench.py) reads its ack mode, its outstanding tags (none) and its
    destination line (none) from the class: 56 bytes, 64 in RSS, instead of 80. A client
    ack or a temp queue's subscription is a ``SubscriptionWithOptions``, which keeps all
    of them; ``new_subscription`` makes the right one."""

    __slots__ = ("_destination", "head", "id")
    ack: str = "auto"
    # delivery tags not yet acknowledged by the client, in delivery order (ack:auto
    # subscriptions share an empty one)
    outstanding: dict[int, None] = NONE_OUTSTANDING
    # the destination header when it is the subscription's own (a temp queue), else empty
    destination_line: bytes = b""

    def __init__(self, id: str, destination: str) -> None:
        self.id = id
        self._destination = destination
        # encoded once, at the first delivery: "MESSAGE" and the subscription header
        self.head = b""

    @property
    def destination(self) -> str:
        """The SUBSCRIBE's destination header."""
        return self._destination

    def __repr__(self) -> str:
        return f"Subscription(id={self.id!r}, destination={self.destination!r}, ack={self.ack!r})"


class TopicSubscription(Subscription):
    """An ack:auto subscription to ``/topic/KEY``: it keeps KEY, the string its binding
    and the topic exchange's index already hold, not a copy of the whole destination
    (64 bytes less in RSS); the destination is rebuilt when asked for (errors, the
    subscriber count), never per message."""

    __slots__ = ()

    @property
    def destination(self) -> str:
        return "/topic/" + self._destination


class SubscriptionWithOptions(Subscription):
    __slots__ = ("ack", "destination_line", "outstanding")

    def __init__(self, id: str, destination: str, ack: str) -> None:
        super().__init__(id, destination)
        self.ack = ack
        self.outstanding = NONE_OUTSTANDING if ack == "auto" else {}
        self.destination_line = b""


def new_subscription(
    id: str, destination: str, ack: str, topic_key: str | None = None
) -> Subscription:
    """A ``Subscription``, or a ``SubscriptionWithOptions`` for a client ack mode or a
    temp queue (whose ``destination_line`` ``Subscribing._consume`` writes), or a
    ``TopicSubscription`` when ``destination`` is ``/topic/`` + ``topic_key`` (the
    routing key its binding holds)."""
    if ack == "auto" and not destination.startswith("/temp-queue/"):
        if topic_key is not None and destination == "/topic/" + topic_key:
            return TopicSubscription(id, topic_key)
        return Subscription(id, destination)
    return SubscriptionWithOptions(id, destination, ack)
