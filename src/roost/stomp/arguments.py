"""STOMP headers that become queue and consumer arguments, typed as AMQP clients send them.

RabbitMQ's STOMP plugin reads queue arguments (``x-queue-type``, ``x-max-length``, …) from
the headers of the SEND or SUBSCRIBE that declares a ``/queue/`` destination, and stream
consumer arguments (``x-stream-offset``, …) from SUBSCRIBE. Header values are text, so
each key has a type here: the core compares arguments by value and type on redeclare,
and ``x-max-length: 10`` from STOMP must equal the integer an AMQP client declared.
"""

from __future__ import annotations

import datetime
from typing import Any, Final

from roost.core.errors import PreconditionFailed

_INT_QUEUE_ARGS = (
    "x-expires",
    "x-message-ttl",
    "x-max-length",
    "x-max-length-bytes",
    "x-max-priority",
    "x-delivery-limit",
    "x-stream-max-segment-size-bytes",
    "x-cache-size",
    "x-cache-ttl",
)
_TEXT_QUEUE_ARGS = (
    "x-dead-letter-exchange",
    "x-dead-letter-routing-key",
    "x-overflow",
    "x-queue-mode",
    "x-queue-type",
    "x-max-age",
)
_BOOL_QUEUE_ARGS = ("x-single-active-consumer", "x-message-deduplication")
# the headers that make a SEND or SUBSCRIBE declare with arguments (the compiled SEND path
# asks ``QUEUE_ARGS.isdisjoint`` itself: ``none_in`` is an interpreted call per frame)
QUEUE_ARGS: Final = frozenset(_INT_QUEUE_ARGS + _TEXT_QUEUE_ARGS + _BOOL_QUEUE_ARGS)

# RabbitMQ's STOMP forms of x-stream-offset besides first/last/next: offset=N, timestamp=S
_OFFSET_PREFIX = "offset="
_TIMESTAMP_PREFIX = "timestamp="
_NAMED_OFFSETS = ("first", "last", "next", "stored")


def _integer(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise PreconditionFailed(f"invalid value '{text}' for header {key}") from None


def none_in(headers: dict[str, str]) -> bool:
    """Whether the headers carry no queue argument (nearly every SEND: one C-level pass)."""
    return QUEUE_ARGS.isdisjoint(headers)


def queue_arguments(headers: dict[str, str]) -> dict[str, Any]:
    """The queue arguments a declaring SEND or SUBSCRIBE carries as headers."""
    arguments: dict[str, Any] = {}
    if none_in(headers):
        return arguments
    for key in _INT_QUEUE_ARGS:
        if key in headers:
            arguments[key] = _integer(key, headers[key])
    for key in _TEXT_QUEUE_ARGS:
        if key in headers:
            arguments[key] = headers[key]
    for key in _BOOL_QUEUE_ARGS:
        if key in headers:
            arguments[key] = headers[key].lower() == "true"
    return arguments


def stream_offset(text: str) -> Any:
    """``x-stream-offset`` as the core takes it: a name, an int, or a timestamp."""
    if text in _NAMED_OFFSETS:
        return text
    if text.startswith(_TIMESTAMP_PREFIX):
        seconds = _integer("x-stream-offset", text.removeprefix(_TIMESTAMP_PREFIX))
        return datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return _integer("x-stream-offset", text.removeprefix(_OFFSET_PREFIX))


# no arguments: one dict shared by every subscription and binding that has none (each
# costs 64 bytes otherwise); nothing may add to it
NONE: dict[str, Any] = {}


def consumer_arguments(headers: dict[str, str]) -> dict[str, Any]:
    """The stream consumer arguments of a SUBSCRIBE (absent on other queues' subscribers).

    ``x-stream-end-offset`` is left out: its end is a consumer cancel, which a STOMP
    client would see as an ERROR that closes the connection."""
    arguments: dict[str, Any] = {}
    if "x-stream-offset" in headers:
        arguments["x-stream-offset"] = stream_offset(headers["x-stream-offset"])
    if "x-stream-consumer-name" in headers:
        arguments["x-stream-consumer-name"] = headers["x-stream-consumer-name"]
    return arguments or NONE
