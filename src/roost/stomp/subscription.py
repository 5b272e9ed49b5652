"""What a STOMP session keeps per subscription.

An ack:auto subscription that is not a temp queue's (most of them: 100,000 topic
subscriptions are common, bench/rss_bench.py) is kept as one string and no object: its
destination, or for ``/topic/KEY`` the KEY its binding and the topic exchange's index
already hold (a destination always begins with ``/``, a key kept here never does). Its id
is the dict's key, its ack mode ``auto``, nothing outstanding, and its MESSAGE head is
encoded at its first delivery into the session's ``_heads``: a ``Subscription`` object
of 56 bytes (64 in RSS) fewer each. A client-ack or a temp queue's subscription keeps a
``SubscriptionWithOptions`` (a ``TempQueueSubscription``); ``Subscription`` is the view
of either (``subscription_of``) for the rare readers (UNSUBSCRIBE, a cancel, the
subscriber count)."""

from __future__ import annotations

from typing import Final, TypeAlias

# what a subscription has outstanding while it has none: all of them share this one until
# their first client-ack delivery (deliver never adds to it), 64 bytes each fewer
NONE_OUTSTANDING: Final[dict[int, None]] = {}


class Subscription:
    """A subscription's id and destination; ack mode, outstanding tags (none) and
    destination line (none) read from the class (an ack:auto one's)."""

    __slots__ = ("_destination", "id")
    ack: str = "auto"
    # delivery tags not yet acknowledged by the client, in delivery order
    outstanding: dict[int, None] = NONE_OUTSTANDING
    # the destination header when it is the subscription's own (a temp queue), else empty
    destination_line: bytes = b""

    def __init__(self, id: str, destination: str) -> None:
        self.id = id
        # the destination, or a /topic/ destination's key (shared with its binding)
        self._destination = destination

    @property
    def destination(self) -> str:
        """The SUBSCRIBE's destination header (rebuilt from a topic's key: errors and the
        subscriber count ask, never a delivery)."""
        kept = self._destination
        return kept if kept.startswith("/") else "/topic/" + kept

    def kept(self) -> SubscriptionWithOptions | str:
        """What the session keeps of it: its destination string alone."""
        return self._destination

    def __repr__(self) -> str:
        return f"Subscription(id={self.id!r}, destination={self.destination!r}, ack={self.ack!r})"


class SubscriptionWithOptions(Subscription):
    """A client-ack one: four fields, 64 bytes (a fifth would make it 80 in RSS)."""

    __slots__ = ("ack", "outstanding")

    def __init__(self, id: str, destination: str, ack: str) -> None:
        super().__init__(id, destination)
        self.ack = ack
        self.outstanding = NONE_OUTSTANDING  # a dict of its own at its first delivery

    def kept(self) -> SubscriptionWithOptions | str:
        return self


class TempQueueSubscription(SubscriptionWithOptions):
    """A temp queue's: its MESSAGEs name the temp queue as their destination."""

    __slots__ = ("destination_line",)

    def __init__(self, id: str, destination: str, ack: str) -> None:
        super().__init__(id, destination, ack)
        self.destination_line = b""


# what a STOMP session keeps per subscription id
Kept: TypeAlias = "SubscriptionWithOptions | str"


def subscription_of(id: str, kept: Kept) -> Subscription:
    """The subscription a session keeps as ``kept`` under ``id``."""
    return kept if isinstance(kept, Subscription) else Subscription(id, kept)


def new_subscription(
    id: str, destination: str, ack: str, topic_key: str | None = None
) -> Subscription:
    """A ``Subscription``, or a ``SubscriptionWithOptions`` for a client ack mode, or a
    ``TempQueueSubscription`` (whose ``destination_line`` ``Subscribing._consume``
    writes). Each keeps ``topic_key`` (the routing key its binding holds) for its
    destination when that is ``/topic/`` + ``topic_key``, not a copy of the whole text."""
    if topic_key is not None and not topic_key.startswith("/") and (
        destination == "/topic/" + topic_key
    ):
        destination = topic_key
    if destination.startswith("/temp-queue/"):
        return TempQueueSubscription(id, destination, ack)
    if ack == "auto":
        return Subscription(id, destination)
    return SubscriptionWithOptions(id, destination, ack)
