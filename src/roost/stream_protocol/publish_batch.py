"""A Publish frame as ONE core publish: the stream's batched publish (content type
``BATCH_CONTENT_TYPE``, docs/streams.md), which the stream queue stores as one record
per message with one write and confirms with one callback.

Publishing each message on its own cost a core publish (route, push, confirm
bookkeeping) per message, which bench/stream_protocol_bench.py showed was most of the
broker's publish time. The batch's entry per message is ``u32 length | properties |
body`` in the store's message encoding, the same one the Roost pipeline writes with.

Deduplication stays the stream's: the batch's headers carry the publisher reference
and the first publishing id, and the stream drops the leading entries whose ids it has
already stored. That needs consecutive ids, which is what clients send (rstream,
rbfly and the Java client number a producer's messages one by one); a frame whose ids
are not consecutive is published message by message, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roost.codecs.chunk_layout import ENTRIES_CONTENT_TYPE, storable
from roost.codecs.stream_message import BATCH_CONTENT_TYPE, BATCH_LENGTH, batch_properties
from roost.core import Message, Properties
from roost.stream_protocol.amqp10 import data_only
from roost.stream_protocol.consumers import RAW_HEADER
from roost.stream_protocol.frames import PublishedBatch, PublishedMessage
from roost.stream_protocol.publishers import (
    PRODUCER_HEADER,
    PUBLISHING_ID_HEADER,
    to_message,
)

# the properties of the two common shapes, encoded once: an AMQP 1.0 message that is a
# single data section (rstream's AMQPMessage(body=...)), and bytes that are not AMQP 1.0
_PLAIN = batch_properties(Properties(delivery_mode=2).as_tuple())
_RAW = batch_properties(Properties(delivery_mode=2, headers={RAW_HEADER: True}).as_tuple())
_PACK = BATCH_LENGTH.pack


def batchable(
    messages: Sequence[PublishedMessage | PublishedBatch], reference: str
) -> list[PublishedMessage] | None:
    """The frame's messages when it can be one batched publish: more than one, no
    sub-batch, and for a deduplicating publisher (a reference) consecutive ids."""
    if len(messages) < 2:
        return None
    out: list[PublishedMessage] = []
    first = messages[0].publishing_id
    for i, m in enumerate(messages):
        if not isinstance(m, PublishedMessage):
            return None
        if reference and m.publishing_id != first + i:
            return None
        out.append(m)
    return out


def entry(stream: str, data: bytes, filter_value: str | None = None) -> bytes:
    """One batch entry for a message as the client sent it (``publishers.to_message``'s
    mapping, with the two common shapes taken without building a message)."""
    if filter_value is not None:
        message = to_message(stream, data, "", 0, filter_value)
        props = batch_properties(message.properties.as_tuple())
        return _PACK(len(props) + len(message.body)) + props + message.body
    if not data or data[0] != 0x00:
        return _PACK(len(_RAW) + len(data)) + _RAW + data
    body = data_only(data)
    if body is not None:
        return _PACK(len(_PLAIN) + len(body)) + _PLAIN + body
    message = to_message(stream, data, "", 0)
    props = batch_properties(message.properties.as_tuple())
    return _PACK(len(props) + len(message.body)) + props + message.body


def entries_message(
    stream: str, messages: Sequence[PublishedMessage], reference: str
) -> Message | None:
    """The frame as the stream's entries publish (one chunk record in the wire format,
    store/stream_chunk.py: every message kept as the client sent it), when no message
    has a filter value or is empty; None otherwise."""
    parts: list[bytes] = []
    add = parts.append
    for m in messages:
        data = m.data
        if m.filter_value is not None or not storable(data):
            return None
        add(_PACK(len(data)))
        add(data)
    first = messages[0].publishing_id
    return Message("", stream, _batch_properties(ENTRIES_CONTENT_TYPE, first, reference),
                   b"".join(parts))


def entries_publish(stream: str, entries: bytes, first_id: int, reference: str) -> Message:
    """The entries publish of a frame decoded as its entries (``Publish.entries``)."""
    properties = _batch_properties(ENTRIES_CONTENT_TYPE, first_id, reference)
    return Message("", stream, properties, entries)


def _batch_properties(content_type: str, first_id: int, reference: str) -> Properties:
    headers: dict[str, Any] | None = None
    if reference:
        headers = {PRODUCER_HEADER: reference, PUBLISHING_ID_HEADER: first_id}
    return Properties(content_type=content_type, delivery_mode=2, headers=headers)


def batch_message(
    stream: str, messages: Sequence[PublishedMessage], reference: str
) -> Message:
    """The core message for ``messages`` (see ``batchable``): a chunk record's entries
    where they allow (``entries_message``), else the store's batch encoding."""
    wire = entries_message(stream, messages, reference)
    if wire is not None:
        return wire
    parts: list[bytes] = []
    add, plain, plain_size = parts.append, _PLAIN, len(_PLAIN)
    for m in messages:
        data = m.data
        # one data section of under 256 bytes (amqp10.data_only's first case), inline
        if m.filter_value is None and data[:4] == b"\x00Su\xa0" and len(data) == 5 + data[4]:
            add(_PACK(plain_size + len(data) - 5))
            add(plain)
            add(data[5:])
        else:
            add(entry(stream, data, m.filter_value))
    properties = _batch_properties(BATCH_CONTENT_TYPE, messages[0].publishing_id, reference)
    return Message("", stream, properties, b"".join(parts))
