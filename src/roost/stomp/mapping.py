"""STOMP headers <-> the core's message properties, both ways (RabbitMQ's mapping).

``amqp-message-id`` carries the AMQP message-id because a MESSAGE frame's own
``message-id`` is the broker's delivery identifier, as in RabbitMQ.
"""

from __future__ import annotations

from typing import Any

from roost.core.broker import Properties

# STOMP header -> property name, for string-valued properties
STRING_HEADERS: dict[str, str] = {
    "content-type": "content_type",
    "content-encoding": "content_encoding",
    "correlation-id": "correlation_id",
    "reply-to": "reply_to",
    "expiration": "expiration",
    "amqp-message-id": "message_id",
    "type": "type",
    "user-id": "user_id",
    "app-id": "app_id",
}
# protocol headers that never become AMQP headers
PROTOCOL_HEADERS = frozenset(
    {
        "destination",
        "receipt",
        "transaction",
        "content-length",
        "persistent",
        "priority",
        "timestamp",
        "message-id",
        "subscription",
        "ack",
        "redelivered",
        *STRING_HEADERS,
    }
)


def properties_from_headers(headers: dict[str, str]) -> Properties:
    props: dict[str, Any] = {}
    for header, prop in STRING_HEADERS.items():
        value = headers.get(header)
        if value is not None:
            props[prop] = value
    if headers.get("persistent", "").lower() == "true":
        props["delivery_mode"] = 2
    priority = headers.get("priority")
    if priority is not None and priority.isdigit():
        props["priority"] = min(int(priority), 255)
    timestamp = headers.get("timestamp")
    if timestamp is not None and timestamp.isdigit():
        props["timestamp"] = int(timestamp)
    custom = {k: v for k, v in headers.items() if k not in PROTOCOL_HEADERS}
    if custom:
        props["headers"] = custom
    return Properties(**props)


REPLY_QUEUE = "/reply-queue/"


def headers_from_properties(props: Properties) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for header, prop in STRING_HEADERS.items():
        value = getattr(props, prop)
        if value is not None:
            out.append((header, str(value)))
    if props.reply_to is not None and not props.reply_to.startswith("/"):
        # an AMQP reply-to is a queue name (or amq.rabbitmq.reply-to.<token>): given as
        # a destination a STOMP client can SEND to, as RabbitMQ's plugin does
        out = [(h, REPLY_QUEUE + v if h == "reply-to" else v) for h, v in out]
    if props.delivery_mode == 2:
        out.append(("persistent", "true"))
    if props.priority is not None:
        out.append(("priority", str(props.priority)))
    if props.timestamp is not None:
        out.append(("timestamp", str(props.timestamp)))
    if props.headers:
        for name, value in props.headers.items():
            if name in PROTOCOL_HEADERS:
                continue
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if isinstance(value, str | int | float | bool):
                out.append((name, str(value).lower() if isinstance(value, bool) else str(value)))
    return out
