"""Message deduplication, opt-in, with the names of the community plugin
(noxdafox/rabbitmq-message-deduplication).

A message's key is its ``x-deduplication-header`` header, or else (a Roost addition) its
``message_id``; a message with neither is never a duplicate. A cache remembers each key
for ``x-cache-ttl`` ms (the exchange or queue argument, or the message's own
``x-cache-ttl`` header; without either, until pushed out) and holds at most
``x-cache-size`` keys, dropping the oldest first. A message whose key is in the cache is
a duplicate: an exchange routes it nowhere, a queue does not take it.

Where it applies: the exchange type ``x-message-deduplication`` (the plugin's: fanout
routing, ``x-cache-size`` required); any exchange or queue declared with the argument
``x-message-deduplication: true``. The cache lives in memory only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from roost.core.errors import PreconditionFailed
from roost.core.message import Message

ENABLE = "x-message-deduplication"
HEADER = "x-deduplication-header"
SIZE = "x-cache-size"
TTL = "x-cache-ttl"
DEFAULT_SIZE = 65536  # when x-cache-size is not given (the plugin's queues have no limit)
_FOREVER = float("inf")


def _hashable(value: Any) -> Hashable:
    """Header values may be tables and arrays (dicts and lists)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    result: Hashable = value
    return result


def message_key(message: Message) -> Hashable | None:
    props = message.properties
    headers = props.headers
    if headers:
        value = headers.get(HEADER)
        if value is not None:
            return _hashable(value)
    return props.message_id


def _int_arg(arguments: dict[str, Any], name: str, owner: str, minimum: int) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PreconditionFailed(
            f"invalid arg '{name}' for {owner}: expected an integer >= {minimum}, got {value!r}"
        )
    return value


class DedupCache:
    """Keys seen lately, each with the monotonic time (ms) it is forgotten at."""

    def __init__(self, size: int = DEFAULT_SIZE, ttl_ms: int | None = None) -> None:
        self.size = size
        self.ttl_ms = ttl_ms
        self._until: OrderedDict[Hashable, float] = OrderedDict()

    @classmethod
    def from_arguments(
        cls, arguments: dict[str, Any], owner: str, *, size_required: bool = False
    ) -> DedupCache:
        """``owner`` names the exchange or queue in errors ("exchange 'x' in vhost '/'")."""
        size = _int_arg(arguments, SIZE, owner, 1)
        if size is None and size_required:
            raise PreconditionFailed(f"missing arg '{SIZE}' for {owner}: it is required")
        ttl = _int_arg(arguments, TTL, owner, 0)
        return cls(size if size is not None else DEFAULT_SIZE, ttl or None)

    def __len__(self) -> int:
        return len(self._until)

    def seen(self, message: Message) -> bool:
        """True when the message's key was seen within its TTL (nothing is recorded)."""
        key = message_key(message)
        if key is None:
            return False
        until = self._until.get(key)
        return until is not None and until > time.monotonic() * 1000

    def remember(self, message: Message) -> None:
        """Record the message's key: a queue took the message."""
        key = message_key(message)
        if key is None:
            return
        ttl = self._message_ttl(message)
        self._until[key] = time.monotonic() * 1000 + ttl if ttl else _FOREVER
        self._until.move_to_end(key)
        while len(self._until) > self.size:
            self._until.popitem(last=False)

    def _message_ttl(self, message: Message) -> int | None:
        own = (message.properties.headers or {}).get(TTL)
        if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
            return own
        return self.ttl_ms


def enabled(arguments: dict[str, Any], owner: str) -> bool:
    """Is ``x-message-deduplication`` set to true? Anything but a boolean is refused."""
    value = arguments.get(ENABLE)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise PreconditionFailed(f"invalid arg '{ENABLE}' for {owner}: expected true or false")
    return value

