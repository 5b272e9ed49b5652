"""Messages on the link: properties travel as the AMQP content-header bytes (the
publishing adapter's own when it kept them), opaque to the link. The node that takes a
message off the link keeps those bytes with it (deliveries reuse them) and decodes them
through a ``PropertiesCache`` where one sender's messages repeat their properties, as an
AMQP channel does for its publisher, headers included (``link_properties_cache``)."""

from __future__ import annotations

from roost.amqp.codec import decode_properties, encode_properties
from roost.amqp.properties import PropertiesCache
from roost.core.message import Message, Properties

__all__ = [
    "PropertiesCache", "link_properties_cache", "message_cached", "message_of", "properties_of",
]


def link_properties_cache() -> PropertiesCache:
    """One sender's cache on the receiving node: properties with headers are decoded
    once too while their bytes repeat (the decoded headers dict shared, as the core
    never changes one in place)."""
    return PropertiesCache(share_headers=True)


def properties_of(message: Message) -> bytes:
    raw = message.encoded_properties
    if raw is None:
        raw = message.encoded_properties = encode_properties(message.properties)
    return raw


def message_of(exchange: str, routing_key: str, raw: bytes, body: bytes) -> Message:
    return Message(exchange, routing_key, Properties(*decode_properties(raw)), body, raw)


def message_cached(
    cache: PropertiesCache, exchange: str, routing_key: str, raw: bytes, body: bytes
) -> Message:
    """``message_of`` with the properties decoded once while ``raw`` repeats (a forwarded
    publish decoded them again on the home node: 3% of its CPU in a hop run)."""
    return Message(exchange, routing_key, cache.decode(raw), body, raw)
