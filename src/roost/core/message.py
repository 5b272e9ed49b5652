"""Messages as the core sees them: routing data, properties and a shared body."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

PROPERTY_NAMES: tuple[str, ...] = (
    "content_type",
    "content_encoding",
    "headers",
    "delivery_mode",
    "priority",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "timestamp",
    "type",
    "user_id",
    "app_id",
    "cluster_id",
)

# one C call for all fourteen (a generator over getattr was 8% of a stream append)
_ALL_VALUES = attrgetter(*PROPERTY_NAMES)


class Properties:
    """The fourteen message properties of RabbitMQ's model (STOMP headers map onto them).

    Positional order matches the AMQP property list, so a decoded tuple can be splatted in.
    """

    __slots__ = PROPERTY_NAMES

    def __init__(
        self,
        content_type: str | None = None,
        content_encoding: str | None = None,
        headers: dict[str, Any] | None = None,
        delivery_mode: int | None = None,
        priority: int | None = None,
        correlation_id: str | None = None,
        reply_to: str | None = None,
        expiration: str | None = None,
        message_id: str | None = None,
        timestamp: int | None = None,
        type: str | None = None,
        user_id: str | None = None,
        app_id: str | None = None,
        cluster_id: str | None = None,
    ) -> None:
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.headers = headers
        self.delivery_mode = delivery_mode
        self.priority = priority
        self.correlation_id = correlation_id
        self.reply_to = reply_to
        self.expiration = expiration
        self.message_id = message_id
        self.timestamp = timestamp
        self.type = type
        self.user_id = user_id
        self.app_id = app_id
        self.cluster_id = cluster_id

    def replace(self, **changes: Any) -> Properties:
        values = {name: getattr(self, name) for name in PROPERTY_NAMES}
        values.update(changes)
        return Properties(**values)

    def as_tuple(self) -> tuple[Any, ...]:
        """All fourteen values in PROPERTY_NAMES order (the store's encoding input)."""
        return _ALL_VALUES(self)

    def as_dict(self) -> dict[str, Any]:
        """Only the properties that are set."""
        return {n: v for n in PROPERTY_NAMES if (v := getattr(self, n)) is not None}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Properties):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in PROPERTY_NAMES)

    def __repr__(self) -> str:
        return f"Properties({self.as_dict()!r})"


EMPTY_PROPERTIES = Properties()


def header_text(value: Any) -> str:
    """A header read as text: bytes decoded, anything not text or bytes (absent
    included) as ``""``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


class Message:
    """One published message. Immutable by convention: a change makes a new Message.

    The body is stored once and shared by every queue the message is routed to.
    ``encoded_properties`` is a cache a protocol adapter may fill with its own encoding
    of ``properties`` (AMQP forwards the publisher's bytes verbatim); the core never
    reads it, and it is dropped whenever properties change.
    """

    __slots__ = (
        "body",
        "encoded_properties",
        "exchange",
        "properties",
        "published_at",
        "routing_key",
    )

    def __init__(
        self,
        exchange: str,
        routing_key: str,
        properties: Properties,
        body: bytes,
        encoded_properties: bytes | None = None,
    ) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.properties = properties
        self.body = body
        self.encoded_properties = encoded_properties
        # the monotonic time of its publish, for one message in N (core/latency.py)
        self.published_at: float | None = None

    @property
    def persistent(self) -> bool:
        return self.properties.delivery_mode == 2

    @property
    def size(self) -> int:
        return len(self.body)

    def with_properties(self, properties: Properties) -> Message:
        return Message(self.exchange, self.routing_key, properties, self.body)

    def __repr__(self) -> str:
        return (
            f"Message({self.exchange!r}, {self.routing_key!r}, {self.properties!r}, "
            f"{len(self.body)} bytes)"
        )
