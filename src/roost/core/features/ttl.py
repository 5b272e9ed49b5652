"""Message TTL: the deadline of a message from x-message-ttl and its expiration property.

RabbitMQ takes the lower of the queue's x-message-ttl and the message's expiration
(a string of non-negative milliseconds); a malformed expiration is refused at publish
with RabbitMQ's reason (Erlang's ``string:to_integer`` rules: an optional sign, digits,
nothing after them).
"""

from __future__ import annotations

import re
import time

from roost.core.errors import PreconditionFailed
from roost.core.message import Message

MAX_EXPIRATION = 2**32 - 1  # RabbitMQ's largest timer (ms)
_LEADING_INT = re.compile(r"[+-]?[0-9]+")


def parse_expiration(value: str | None) -> int | None:
    """Milliseconds from an ``expiration`` property, or PreconditionFailed."""
    if value is None:
        return None
    match = _LEADING_INT.match(value)
    if match is None:
        why = "no_integer"
    elif match.end() != len(value):
        why = f'{{leftover_string,"{value[match.end():]}"}}'
    else:
        ms = int(match.group())
        if 0 <= ms <= MAX_EXPIRATION:
            return ms
        why = f"{{value_negative,{ms}}}" if ms < 0 else f"{{value_too_large,{ms}}}"
    raise PreconditionFailed(f"invalid expiration '{value}': {why}")


def deadline_ms(message: Message, queue_ttl: int | None, now_ms: int) -> int | None:
    """Absolute expiry time in ms, or None when the message never expires."""
    own = parse_expiration(message.properties.expiration)
    ttls = [t for t in (queue_ttl, own) if t is not None]
    return now_ms + min(ttls) if ttls else None


def deadline(message: Message | None, queue_ttl: int | None, now: float) -> float:
    """As ``deadline_ms`` in seconds on a monotonic clock; 0.0 when it never expires.

    A value already checked at publish cannot fail here; a message read back from the
    store is trusted the same way."""
    own = None
    if message is not None and message.properties.expiration is not None:
        try:
            own = parse_expiration(message.properties.expiration)
        except PreconditionFailed:
            own = None
    ttls = [t for t in (queue_ttl, own) if t is not None]
    # a zero TTL must still read as "has a deadline": never return exactly 0.0
    return max(now + min(ttls) / 1000.0, 1e-9) if ttls else 0.0


def wall_ms(deadline: float) -> int:
    """A monotonic deadline as milliseconds since the epoch, for the store: a message
    recovered after a restart expires when it would have (RabbitMQ keeps the absolute
    expiry too)."""
    return max(int((time.time() + deadline - time.monotonic()) * 1000), 1)


def from_wall_ms(expires_ms: int) -> float:
    """A stored absolute deadline back on this process's monotonic clock (past ones
    included: such a message is due at once)."""
    return max(time.monotonic() + (expires_ms - time.time() * 1000) / 1000, 1e-9)
