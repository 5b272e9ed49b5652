"""STOMP headers <-> the core's message properties, both ways (RabbitMQ's mapping).

``amqp-message-id`` carries the AMQP message-id because a MESSAGE frame's own
``message-id`` is the broker's delivery identifier, as in RabbitMQ.
"""

from __future__ import annotations

from typing import Any

from roost.core import EMPTY_PROPERTIES, Properties
from roost.stomp.frame_encoding import header_lines
from roost.stomp.frames import StompParseError

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

# headers that set no property: a SEND with only these has the shared empty properties
# (difference, not "-": "frozenset - dict.keys()" is a set at run time, which the
# compiled build refuses where the type says frozenset)
_NO_PROPERTY = PROTOCOL_HEADERS.difference(STRING_HEADERS, {"persistent", "priority", "timestamp"})


# a stream's idempotent publishing: an integer there, as AMQP clients send it
PUBLISHING_ID = "x-publishing-id"
_MAX_PUBLISHING_ID = (1 << 63) - 1


def publishing_id(value: str) -> int:
    """``x-publishing-id`` arrives as text; the stream deduplicates on integers."""
    if value.isascii() and value.isdigit() and int(value) <= _MAX_PUBLISHING_ID:
        return int(value)
    raise StompParseError(
        "invalid x-publishing-id",
        f"'{value}' is not a publishing id (an integer 0..{_MAX_PUBLISHING_ID})",
    )


def properties_from_headers(headers: dict[str, str]) -> Properties:
    """One pass over a SEND's headers (a handful, usually): on every message's path."""
    if _NO_PROPERTY.issuperset(headers):  # one C-level check for the plainest SENDs
        return EMPTY_PROPERTIES
    props: dict[str, Any] = {}
    custom: dict[str, Any] = {}
    for name, value in headers.items():
        prop = STRING_HEADERS.get(name)
        if prop is not None:
            props[prop] = value
        elif name not in PROTOCOL_HEADERS:
            custom[name] = value if name != PUBLISHING_ID else publishing_id(value)
        elif name == "persistent":
            if value.lower() == "true":
                props["delivery_mode"] = 2
        elif name == "priority":
            if value.isdigit():
                props["priority"] = min(int(value), 255)
        elif name == "timestamp" and value.isdigit():
            props["timestamp"] = int(value)
    if custom:
        props["headers"] = custom
    elif not props:  # shared, as AMQP shares it: its MESSAGE header lines are empty
        return EMPTY_PROPERTIES
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


class _LastEncoding:
    """The header lines of the last properties encoded. A message fanned out to many
    subscriptions shares one Properties object (immutable by convention, and kept alive
    here, so identity is a safe key): its lines are encoded once, not once per MESSAGE."""

    __slots__ = ("lines", "props", "version")

    def __init__(self) -> None:
        self.props: Properties | None = None
        self.version = ""
        self.lines = b""


_last = _LastEncoding()


def property_lines(props: Properties, version: str) -> bytes:
    """``headers_from_properties`` as encoded header lines of a MESSAGE frame."""
    if props is EMPTY_PROPERTIES:
        return b""
    last = _last
    if last.props is props and last.version == version:
        return last.lines
    lines = header_lines(headers_from_properties(props), version)
    last.props, last.version, last.lines = props, version, lines
    return lines
