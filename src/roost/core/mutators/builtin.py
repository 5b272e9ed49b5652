"""The built-in mutators (registered as entry points in pyproject.toml)."""

from __future__ import annotations

import json
import time
from typing import Any

from roost.core.message import Message
from roost.core.mutators.chain import Rejected
from roost.core.mutators.schema import validate


def add_timestamp(message: Message, args: dict[str, Any]) -> Message:
    """Sets the ``timestamp`` property (seconds) when absent, and a header with the
    broker's receive time in milliseconds (``header``, default ``x-received-at``)."""
    now_ms = time.time_ns() // 1_000_000
    props = message.properties
    headers = dict(props.headers or {})
    headers[str(args.get("header", "x-received-at"))] = now_ms
    timestamp = props.timestamp if props.timestamp is not None else now_ms // 1000
    return message.with_properties(props.replace(headers=headers, timestamp=timestamp))


def json_schema(message: Message, args: dict[str, Any]) -> Message:
    """Lets through only bodies that are JSON matching ``schema`` (see schema.py)."""
    schema = args.get("schema")
    if not isinstance(schema, dict):
        raise ValueError("json-schema needs a 'schema' object in message-mutator-args")
    try:
        document = json.loads(message.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Rejected(f"body is not JSON ({exc})") from None
    problem = validate(document, schema)
    if problem is not None:
        raise Rejected(problem)
    return message
