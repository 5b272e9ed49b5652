"""A declared publisher, and a published stream message as a Roost message.

An AMQP 1.0 message (``amqp10.py``) maps onto Roost's properties as RabbitMQ maps it
for its AMQP 0-9-1 clients: message-id, correlation-id, reply-to, content-type,
content-encoding, subject (as ``type``), creation-time (as ``timestamp``, in seconds)
and the application properties as headers; the body is its data. Anything else (raw
bytes, as rstream sends a plain ``bytes``) is kept exactly, marked with a header so a
stream client reads back the same bytes.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from roost.core import Message, Properties
from roost.stream_protocol.amqp10 import Described, decode_message
from roost.stream_protocol.consumers import FILTER_HEADER, RAW_HEADER

PRODUCER_HEADER = "x-stream-producer-name"
PUBLISHING_ID_HEADER = "x-publishing-id"


@dataclass
class Publisher:
    id: int
    reference: str  # "": no deduplication
    stream: str


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _header_value(value: Any) -> Any:
    if isinstance(value, uuid.UUID | Described):
        return str(value)
    if isinstance(value, list):
        return [_header_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _header_value(v) for k, v in value.items()}
    return value


def mapped_properties(p: dict[str, Any]) -> tuple[Any, ...]:
    """The AMQP 0-9-1 properties an AMQP 1.0 properties section (``p``, by field name)
    maps onto: content type, content encoding, correlation id, reply to, message id,
    timestamp (creation time, in seconds) and type (subject)."""
    created = p.get("creation_time")
    return (
        _text(p.get("content_type")), _text(p.get("content_encoding")),
        _text(p.get("correlation_id")), _text(p.get("reply_to")), _text(p.get("message_id")),
        int(created.timestamp()) if isinstance(created, datetime.datetime) else None,
        _text(p.get("subject")),
    )


def to_message(
    stream: str, data: bytes, reference: str, publishing_id: int, filter_value: str | None = None
) -> Message:
    decoded = decode_message(data)
    headers: dict[str, Any]
    if decoded is None:
        headers = {RAW_HEADER: True}
        props = Properties(delivery_mode=2, headers=headers)
        body = data
    else:
        headers = {k: _header_value(v) for k, v in decoded.application_properties.items()}
        ct, ce, corr, reply, mid, ts, kind = mapped_properties(decoded.properties)
        props = Properties(
            content_type=ct, content_encoding=ce, headers=headers, delivery_mode=2,
            correlation_id=corr, reply_to=reply, message_id=mid, timestamp=ts, type=kind,
        )
        body = decoded.body
    if filter_value is not None:  # Publish version 2: what filtering subscriptions match
        headers[FILTER_HEADER] = filter_value
    if reference:
        headers[PRODUCER_HEADER] = reference
        headers[PUBLISHING_ID_HEADER] = publishing_id
    if not headers:
        props.headers = None
    return Message("", stream, props, body)


def chunk_message_values(data: bytes) -> tuple[tuple[Any, ...], bytes]:
    """How a message kept as sent in a chunk record reads for AMQP 0-9-1, STOMP and
    Spark: the same properties and body ``to_message`` stores it with otherwise."""
    message = to_message("", data, "", 0)
    return message.properties.as_tuple(), message.body
