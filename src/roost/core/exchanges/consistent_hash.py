"""``x-consistent-hash``: each message goes to one destination, picked by a hash.

As RabbitMQ's consistent-hash exchange (3.8+): a binding's key is its weight, a positive
integer; the bindings own ``weight`` consecutive buckets each, in the order they were
made; a message's hash input (its routing key, or the header named by the exchange
argument ``hash-header``, or the property named by ``hash-property``) picks a bucket by
jump consistent hashing (Lamping & Veach, 2014). So a key always reaches the same
destination while the bindings stay the same, destinations receive traffic in proportion
to their weights, and a binding added last takes only its share of keys from the others.
A message without the header or property is hashed as an empty value, so all such
messages reach one destination (RabbitMQ 3.10 does the same with its ``undefined``).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from hashlib import blake2b
from typing import TYPE_CHECKING, Any

from roost.core.errors import PreconditionFailed
from roost.core.exchanges.base import Binding, Destination, Exchange

if TYPE_CHECKING:
    from roost.core.message import Message

HASH_PROPERTIES = ("message_id", "correlation_id", "timestamp")
_WEIGHT = re.compile(r"[+-]?[0-9]+")  # Erlang's list_to_integer: no spaces, no underscores
_MASK64 = (1 << 64) - 1


def jump_hash(key: int, buckets: int) -> int:
    """The bucket in ``range(buckets)`` for a 64-bit key (Lamping & Veach's algorithm)."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & _MASK64
        j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return b


def key_hash(value: Any) -> int:
    if value is None:
        raw = b""
    elif isinstance(value, bytes):
        raw = value
    else:
        raw = str(value).encode("utf-8", "surrogatepass")
    return int.from_bytes(blake2b(raw, digest_size=8).digest(), "big")


def weight_of(routing_key: str) -> int:
    if not _WEIGHT.fullmatch(routing_key):
        shown = f'<<"{routing_key}">>' if routing_key else "<<>>"  # Erlang's binary syntax
        raise PreconditionFailed(f"The binding key must be an integer: {shown}")
    weight = int(routing_key)
    if weight < 1:
        raise PreconditionFailed("The binding key must be greater than 0")
    return weight


class ConsistentHashExchange(Exchange):
    kind = "x-consistent-hash"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        header = self.arguments.get("hash-header")
        prop = self.arguments.get("hash-property")
        if header is not None and prop is not None:
            raise PreconditionFailed("hash-header and hash-property are mutually exclusive")
        if header is not None and not isinstance(header, str):
            raise PreconditionFailed("hash-header must be a string")  # RabbitMQ: 541
        if prop is not None and prop not in HASH_PROPERTIES:
            raise PreconditionFailed(f"Unsupported property: {prop}")
        self._header: str | None = header
        self._property: str | None = prop
        # binding key -> (destination, weight), in binding order; buckets are built from it
        self._weights: dict[tuple[Any, ...], tuple[Destination, int]] = {}
        self._buckets: list[Destination] = []

    def validate_binding(self, routing_key: str, arguments: dict[str, Any]) -> None:
        weight_of(routing_key)

    def _add(self, binding: Binding) -> None:
        weight = weight_of(binding.routing_key)
        self._weights[binding.key] = (binding.destination, weight)
        self._buckets.extend([binding.destination] * weight)

    def _remove(self, binding: Binding) -> None:
        del self._weights[binding.key]
        # the others keep their order: rebuild the buckets from what is left
        self._buckets = [dest for dest, weight in self._weights.values() for _ in range(weight)]

    def hash_input(self, message: Message) -> Any:
        if self._header is not None:
            return (message.properties.headers or {}).get(self._header)
        if self._property is not None:
            return getattr(message.properties, self._property)
        return message.routing_key

    def route(self, message: Message) -> Collection[Destination]:
        buckets = self._buckets
        if not buckets:
            return ()
        return (buckets[jump_hash(key_hash(self.hash_input(message)), len(buckets))],)
