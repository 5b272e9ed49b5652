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

    __slots__ = ("destination", "head", "id")
    ack: str = "auto"
    # delivery tags not yet acknowledged by the client, in delivery order (ack:auto
    # subscriptions share an empty one)
    outstanding: dict[int, None] = NONE_OUTSTANDING
    # the destination header when it is the subscription's own (a temp queue), else empty
    destination_line: bytes = b""

    def __init__(self, id: str, destination: str) -> None:
        self.id = id
        self.destination = destination
        # encoded once, at the first delivery: "MESSAGE" and the subscription header
        self.head = b""

    def __repr__(self) -> str:
        return f"Subscription(id={self.id!r}, destination={self.destination!r}, ack={self.ack!r})"


class SubscriptionWithOptions(Subscription):
    __slots__ = ("ack", "destination_line", "outstanding")

    def __init__(self, id: str, destination: str, ack: str) -> None:
        super().__init__(id, destination)
        self.ack = ack
        self.outstanding = NONE_OUTSTANDING if ack == "auto" else {}
        self.destination_line = b""


def new_subscription(id: str, destination: str, ack: str) -> Subscription:
    """A ``Subscription``, or a ``SubscriptionWithOptions`` for a client ack mode or a
    temp queue (whose ``destination_line`` ``Subscribing._consume`` writes)."""
    if ack == "auto" and not destination.startswith("/temp-queue/"):
        return Subscription(id, destination)
    return SubscriptionWithOptions(id, destination, ack)
