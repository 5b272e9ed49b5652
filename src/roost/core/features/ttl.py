"""Message TTL: the deadline of a message from x-message-ttl and its expiration property.

RabbitMQ takes the lower of the queue's x-message-ttl and the message's expiration
(a string of non-negative milliseconds); a malformed expiration is refused at publish.
"""

from __future__ import annotations

from roost.core.message import Message


def parse_expiration(value: str | None) -> int | None:
    """Milliseconds from an ``expiration`` property, or ValueError.

    The text is not yet checked against RabbitMQ's (to do when TTL is wired).
    """
    if value is None:
        return None
    if not value.isdigit():
        raise ValueError(f"PRECONDITION_FAILED - invalid expiration '{value}': no_integer")
    return int(value)


def deadline_ms(message: Message, queue_ttl: int | None, now_ms: int) -> int | None:
    """Absolute expiry time in ms, or None when the message never expires."""
    own = parse_expiration(message.properties.expiration)
    ttls = [t for t in (queue_ttl, own) if t is not None]
    return now_ms + min(ttls) if ttls else None
