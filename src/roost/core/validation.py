"""Checks of definition values as RabbitMQ words its refusals: regular expressions of
permissions, user and vhost tags, limit names and values, queue types."""

from __future__ import annotations

import re
from typing import Any

from roost.core.errors import PreconditionFailed

QUEUE_TYPES = ("classic", "quorum", "stream")
VHOST_LIMITS = ("max-connections", "max-queues", "max-exchanges")
USER_LIMITS = ("max-connections", "max-channels")


def check_regex(pattern: Any, what: str) -> str:
    if not isinstance(pattern, str):
        raise PreconditionFailed(f"{what} must be a string")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PreconditionFailed(
            f"invalid regular expression for {what} '{pattern}': {exc}"
        ) from None
    return pattern


def parse_tags(tags: Any) -> list[str]:
    """RabbitMQ accepts tags as a list or as one comma-separated string."""
    if tags is None:
        return []
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        return [t.strip() for t in tags if t.strip()]
    raise PreconditionFailed("tags must be a list of strings or a comma-separated string")


def limit_value(name: str, value: Any, allowed: tuple[str, ...]) -> int:
    if name not in allowed:
        raise PreconditionFailed(
            f"unknown limit '{name}'; known limits are {', '.join(allowed)}"
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise PreconditionFailed(f"value of limit '{name}' must be an integer")
    return value
