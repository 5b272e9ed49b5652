"""Federation upstreams and upstream sets as RabbitMQ 3.10's federation plugin takes
them (runtime parameters of components ``federation-upstream`` and
``federation-upstream-set``), checked and given its defaults."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from roost.client import parse_uri

ACK_MODES = ("on-confirm", "on-publish", "no-ack")
UPSTREAM_KEYS = frozenset(
    {
        "uri",
        "exchange",
        "queue",
        "prefetch-count",
        "reconnect-delay",
        "ack-mode",
        "trust-user-id",
        "max-hops",
        "expires",
        "message-ttl",
        "ha-policy",
        "queue-type",
        "consumer-tag",
        "bind-nowait",
        "resource-cleanup-mode",
    }
)


@dataclass(frozen=True)
class Upstream:
    name: str
    uris: tuple[str, ...]
    exchange: str | None = None  # None: the downstream exchange's own name
    queue: str | None = None  # None: the downstream queue's own name
    prefetch_count: int = 1000
    reconnect_delay: float = 5.0
    ack_mode: str = "on-confirm"
    trust_user_id: bool = False
    max_hops: int = 1
    expires: int | None = None  # ms, the upstream queue's x-expires
    message_ttl: int | None = None  # ms, the upstream queue's x-message-ttl
    consumer_tag: str | None = None


def _whole(value: dict[str, Any], key: str, default: int | None, low: int) -> int | None:
    found = value.get(key, default)
    if found is None:
        return None
    if isinstance(found, bool) or not isinstance(found, int) or found < low:
        raise ValueError(f"{key} must be a whole number >= {low}")
    return found


def _text(value: dict[str, Any], key: str) -> str | None:
    found = value.get(key)
    if found is not None and not isinstance(found, str):
        raise ValueError(f"{key} must be a string")
    return found


def parse_upstream(name: str, value: Any) -> Upstream:
    """The upstream a ``federation-upstream`` value describes; ValueError saying what is
    wrong (RabbitMQ refuses the same values)."""
    if not isinstance(value, dict):
        raise ValueError("a federation upstream's value must be an object")
    unknown = sorted(set(value) - UPSTREAM_KEYS)
    if unknown:
        raise ValueError(f"unknown federation upstream keys: {', '.join(unknown)}")
    raw = value.get("uri")
    uris = [raw] if isinstance(raw, str) else raw
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise ValueError("uri must be a URI or a non-empty list of URIs")
    for uri in uris:
        parse_uri(uri)
    ack_mode = value.get("ack-mode", "on-confirm")
    if ack_mode not in ACK_MODES:
        raise ValueError(f"ack-mode must be one of {', '.join(ACK_MODES)}")
    delay = value.get("reconnect-delay", 5)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ValueError("reconnect-delay must be a number of seconds >= 0")
    trust = value.get("trust-user-id", False)
    if not isinstance(trust, bool):
        raise ValueError("trust-user-id must be true or false")
    prefetch = _whole(value, "prefetch-count", 1000, 1)
    hops = _whole(value, "max-hops", 1, 1)
    assert prefetch is not None and hops is not None
    return Upstream(
        name=name,
        uris=tuple(uris),
        exchange=_text(value, "exchange"),
        queue=_text(value, "queue"),
        prefetch_count=prefetch,
        reconnect_delay=float(delay),
        ack_mode=ack_mode,
        trust_user_id=trust,
        max_hops=hops,
        expires=_whole(value, "expires", None, 1),
        message_ttl=_whole(value, "message-ttl", None, 0),
        consumer_tag=_text(value, "consumer-tag"),
    )


def parse_upstream_set(value: Any) -> list[dict[str, Any]]:
    """A ``federation-upstream-set`` value: a list of ``{"upstream": name, ...}``, each
    entry's other keys overriding the named upstream's."""
    if not isinstance(value, list) or not all(
        isinstance(e, dict) and isinstance(e.get("upstream"), str) for e in value
    ):
        raise ValueError('an upstream set is a list of {"upstream": name, ...} objects')
    for entry in value:
        unknown = sorted(set(entry) - UPSTREAM_KEYS - {"upstream"})
        if unknown:
            raise ValueError(f"unknown federation upstream keys: {', '.join(unknown)}")
    return value


def with_overrides(upstream: Upstream, entry: dict[str, Any], base: dict[str, Any]) -> Upstream:
    """``upstream`` with an upstream set entry's keys applied over its own value."""
    overrides = {k: v for k, v in entry.items() if k != "upstream"}
    if not overrides:
        return upstream
    return replace(parse_upstream(upstream.name, {**base, **overrides}))
