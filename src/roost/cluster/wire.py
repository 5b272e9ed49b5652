"""Messages on the link: properties travel as the AMQP content-header bytes (the
publishing adapter's own when it kept them), opaque to the link."""

from __future__ import annotations

from roost.amqp.codec import decode_properties, encode_properties
from roost.core.message import Message, Properties


def properties_of(message: Message) -> bytes:
    raw = message.encoded_properties
    if raw is None:
        raw = message.encoded_properties = encode_properties(message.properties)
    return raw


def message_of(exchange: str, routing_key: str, raw: bytes, body: bytes) -> Message:
    return Message(exchange, routing_key, Properties(*decode_properties(raw)), body, raw)
