"""Parsing a stream's queue and consumer arguments (RabbitMQ's names and value forms)."""

from __future__ import annotations

import datetime
import re
from typing import Any

from roost.core.errors import PreconditionFailed

_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "D": 86400, "M": 30 * 86400, "Y": 365 * 86400}
_AGE = re.compile(r"^(\d+)([smhDMY])$")


def parse_max_age(value: Any) -> int:
    """``x-max-age`` such as ``7D`` or ``1h`` in milliseconds (0 = keep forever)."""
    if value is None:
        return 0
    match = _AGE.match(str(value))
    if match is None:
        raise PreconditionFailed(f"invalid value '{value}' for x-max-age (use e.g. 7D or 1h)")
    return int(match.group(1)) * _AGE_UNITS[match.group(2)] * 1000


def int_arg(arguments: dict[str, Any], key: str) -> int:
    value = arguments.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PreconditionFailed(f"invalid value '{value}' for {key}")
    return value


# A parsed x-stream-offset: ("first"|"last"|"next"|"stored", None), ("offset", n),
# ("timestamp", ms)
StartSpec = tuple[str, int | None]

# Roost's extension: a start time in milliseconds (an AMQP timestamp has whole seconds)
START_TIMESTAMP_MS = "x-roost-start-timestamp-ms"


def start_from(arguments: dict[str, Any]) -> StartSpec:
    """Where a stream consumer starts: ``x-stream-offset``, or the Roost extension
    ``x-roost-start-timestamp-ms`` (a long; the two together are refused)."""
    ms = arguments.get(START_TIMESTAMP_MS)
    if ms is None:
        return parse_start(arguments.get("x-stream-offset"))
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise PreconditionFailed(
            f"invalid {START_TIMESTAMP_MS} '{ms}': milliseconds since the epoch"
        )
    if arguments.get("x-stream-offset") is not None:
        raise PreconditionFailed(f"x-stream-offset and {START_TIMESTAMP_MS} are exclusive")
    return ("timestamp", ms)


def parse_start(value: Any) -> StartSpec:
    if value is None:
        return ("next", None)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return ("timestamp", int(value.timestamp() * 1000))
    if isinstance(value, bool):
        raise PreconditionFailed(f"invalid x-stream-offset '{value}'")
    if isinstance(value, int):
        if value < 0:
            raise PreconditionFailed(f"invalid x-stream-offset '{value}'")
        return ("offset", value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str) and value in ("first", "last", "next", "stored"):
        return (value, None)
    raise PreconditionFailed(
        f"invalid x-stream-offset '{value}' (first, last, next, stored, an offset or a timestamp)"
    )
