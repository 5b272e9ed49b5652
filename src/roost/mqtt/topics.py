"""Topic names and topic filters (MQTT 5 spec 4.7, 3.1.1 spec 4.7; shared
subscriptions 4.8.2), validated as the codec and the session need them.

- Both are UTF-8 strings of 1 to 65,535 bytes without U+0000 (a server may set a lower
  ``max_length``: RabbitMQ and LavinMQ refuse long topics the same way).
- A topic name (PUBLISH, will) has no wildcards.
- In a filter, ``#`` is alone in the last level and ``+`` is alone in its level.
- ``$share/{ShareName}/{filter}`` is a shared subscription: the share name is at least
  one character without ``/``, ``+`` or ``#``, and the filter after it must be valid.
- Topics starting with ``$`` are not matched by a filter starting with a wildcard.
"""

from __future__ import annotations

from typing import Final

from roost.mqtt.errors import MQTTError
from roost.mqtt.reason_codes import TOPIC_FILTER_INVALID, TOPIC_NAME_INVALID

MAX_TOPIC_LENGTH: Final = 65_535
SHARE_PREFIX: Final = "$share/"


def _check_length(topic: str, max_length: int, code: int, what: str) -> None:
    if not topic:
        raise MQTTError(code, f"empty {what}")
    # a str of n characters is at least n UTF-8 bytes: encode only when it may be long
    if len(topic) * 4 > max_length and len(topic.encode("utf-8")) > max_length:
        raise MQTTError(code, f"{what} longer than {max_length} bytes")
    if "\x00" in topic:
        raise MQTTError(code, f"{what} contains U+0000")


def validate_topic_name(name: str, max_length: int = MAX_TOPIC_LENGTH) -> None:
    """Raises ``MQTTError(0x90 Topic Name invalid)`` unless ``name`` may be published to."""
    _check_length(name, max_length, TOPIC_NAME_INVALID, "topic name")
    if "+" in name or "#" in name:
        raise MQTTError(TOPIC_NAME_INVALID, f"wildcard in topic name {name!r}")


def validate_topic_filter(topic_filter: str, max_length: int = MAX_TOPIC_LENGTH) -> None:
    """Raises ``MQTTError(0x8F Topic Filter invalid)`` unless ``topic_filter`` is valid,
    a shared subscription's included."""
    _check_length(topic_filter, max_length, TOPIC_FILTER_INVALID, "topic filter")
    shared = split_shared(topic_filter)
    if shared is not None:
        share_name, topic_filter = shared
        if not share_name or "+" in share_name or "#" in share_name:
            raise MQTTError(TOPIC_FILTER_INVALID, f"bad share name {share_name!r}")
        if not topic_filter:
            raise MQTTError(TOPIC_FILTER_INVALID, "shared subscription without a filter")
    if "+" not in topic_filter and "#" not in topic_filter:
        return
    levels = topic_filter.split("/")
    last = len(levels) - 1
    for i, level in enumerate(levels):
        if level in ("+", "#"):
            if level == "#" and i != last:
                raise MQTTError(
                    TOPIC_FILTER_INVALID, f"'#' before the last level: {topic_filter!r}"
                )
        elif "+" in level or "#" in level:
            raise MQTTError(
                TOPIC_FILTER_INVALID, f"wildcard inside a level: {topic_filter!r}"
            )


def split_shared(topic_filter: str) -> tuple[str, str] | None:
    """``("group", "a/+")`` for ``"$share/group/a/+"``; None for a plain filter."""
    if not topic_filter.startswith(SHARE_PREFIX):
        return None
    share_name, _, rest = topic_filter[len(SHARE_PREFIX) :].partition("/")
    return share_name, rest


def has_wildcards(topic_filter: str) -> bool:
    return "+" in topic_filter or "#" in topic_filter


def is_system_topic(name: str) -> bool:
    """Topics starting with ``$`` (``$SYS/…``) are the server's (spec 4.7.2)."""
    return name.startswith("$")


def topic_matches(topic_filter: str, name: str) -> bool:
    """Whether a (valid, non-shared) filter matches a topic name (spec 4.7.1-4.7.2)."""
    if is_system_topic(name) and topic_filter[:1] in ("+", "#"):
        return False
    f_levels = topic_filter.split("/")
    n_levels = name.split("/")
    for i, level in enumerate(f_levels):
        if level == "#":
            return True  # also matches the parent level: "a/#" matches "a"
        if i >= len(n_levels):
            return False
        if level != "+" and level != n_levels[i]:
            return False
    return len(f_levels) == len(n_levels)
