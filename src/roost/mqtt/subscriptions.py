"""A connection's MQTT subscriptions and their MQTT 5 options (spec 3.8.3.1), and which
of them a delivery answers to.

A client's plain subscriptions share two queues (``mqtt-subscription-<id>qos0|qos1``),
so a message that lands in one of them carries no word of which filter brought it: the
options that shape its PUBLISH are decided here, from the filters of this connection
that match its topic:

- **no local**: a message this client id published is not delivered when every matching
  subscription asked for no-local (the publisher marks its messages only while it holds
  such a subscription: ``mapping.PUBLISHER_HEADER``);
- **retain as published**: the retain flag of a forwarded message is the flag it was
  published with when a matching subscription asked for it, else 0 (spec 3.3.1.3);
- **subscription identifiers**: every matching subscription's;
- **retain handling 1**: retained messages only when the subscription is new.

A shared subscription (``$share/GROUP/filter``) is one queue per group and filter,
``mqtt-shared-GROUP-<routing key>``, that every member consumes: each message goes to
one member (docs/mqtt.md, "Shared subscriptions").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from roost.mqtt import mapping
from roost.mqtt.topics import split_shared, topic_matches

if TYPE_CHECKING:
    from roost.core import Message

SHARED_TAG: Final = "share:"  # consumer tag prefix of a shared subscription's queue


@dataclass(slots=True)
class Options:
    qos: int
    no_local: bool = False
    retain_as_published: bool = False
    identifier: int | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """How one message goes out: whether at all, its retain flag, its identifiers, and
    whether its consumer acknowledges (a QoS 1 subscription)."""

    send: bool
    retain: bool
    identifiers: list[int]
    acked: bool = False


_PLAIN: Final = Delivery(True, False, [])
_PLAIN_ACKED: Final = Delivery(True, False, [], True)


def shared_queue(group: str, topic_filter: str) -> str:
    return f"mqtt-shared-{group}-{mapping.routing_key(topic_filter)}"


def shared_tag(full_filter: str) -> str:
    return SHARED_TAG + full_filter


class Subscriptions:
    """The subscriptions made on this connection, by their filter as subscribed
    (``$share/g/a/+`` included)."""

    __slots__ = ("_shaping", "plain", "shared", "wants_publisher_mark")

    def __init__(self) -> None:
        self.plain: dict[str, Options] = {}
        self.shared: dict[str, Options] = {}
        # whether any plain subscription has an option that shapes deliveries: without
        # one, a delivery needs no topic matching (the hot path of a plain subscriber)
        self._shaping = False
        self.wants_publisher_mark = False  # a no-local subscription: publishes must say who

    def __len__(self) -> int:
        return len(self.plain) + len(self.shared)

    @property
    def shaping(self) -> bool:
        return self._shaping

    def has(self, full_filter: str) -> bool:
        return full_filter in self.plain or full_filter in self.shared

    def add(self, full_filter: str, options: Options) -> bool:
        """Record a subscription; True when it is new (retain handling 1's test)."""
        table = self.shared if split_shared(full_filter) is not None else self.plain
        new = full_filter not in table
        table[full_filter] = options
        self._update()
        return new

    def forget_plain(self) -> None:
        self.plain.clear()
        self._update()

    def _update(self) -> None:
        plain = self.plain.values()
        self._shaping = any(
            o.no_local or o.retain_as_published or o.identifier is not None for o in plain
        )
        self.wants_publisher_mark = any(o.no_local for o in plain)

    def remove(self, full_filter: str) -> Options | None:
        table = self.shared if split_shared(full_filter) is not None else self.plain
        options = table.pop(full_filter, None)
        self._update()
        return options

    def delivery(
        self, consumer_tag: str, acked_tag: str, topic: str, message: Message, client_id: str
    ) -> Delivery:
        """How a message a consumer of this connection got goes out: ``acked_tag`` is
        the tag of the QoS 1 subscription queue."""
        if consumer_tag.startswith(SHARED_TAG):
            return self._for_shared(consumer_tag, mapping.published_retain(message))
        acked = consumer_tag == acked_tag
        if not self._shaping:
            return _PLAIN_ACKED if acked else _PLAIN
        matching = [o for f, o in self.plain.items() if topic_matches(f, topic)]
        if not matching:  # bound by an earlier connection of a persistent session
            return Delivery(True, False, [], acked)
        if mapping.publisher(message) == client_id and all(o.no_local for o in matching):
            return Delivery(False, False, [], acked)
        ids = sorted({o.identifier for o in matching if o.identifier is not None})
        keep = any(o.retain_as_published for o in matching) and mapping.published_retain(
            message
        )
        return Delivery(True, keep, ids, acked)

    def _for_shared(self, consumer_tag: str, retained: bool) -> Delivery:
        options = self.shared.get(consumer_tag[len(SHARED_TAG) :])
        if options is None:
            return Delivery(True, False, [])
        ids = [options.identifier] if options.identifier is not None else []
        rap = retained and options.retain_as_published
        return Delivery(True, rap, ids, options.qos == 1)

    def identifiers(self, full_filter: str) -> list[int]:
        """The identifier of one subscription (for its retained messages)."""
        options = self.plain.get(full_filter) or self.shared.get(full_filter)
        return [options.identifier] if options and options.identifier is not None else []

    def matching_ids(self, topic: str) -> list[int]:
        return sorted(
            {o.identifier for f, o in self.plain.items()
             if o.identifier is not None and topic_matches(f, topic)}
        )
