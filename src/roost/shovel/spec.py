"""A shovel parameter's value, checked as RabbitMQ 3.10's shovel plugin checks it, with
its defaults (keys and defaults: RabbitMQ's dynamic shovel documentation)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from roost.client import Endpoint, parse_uri

ACK_MODES = ("on-confirm", "on-publish", "no-ack")
KNOWN = frozenset({
    "src-protocol", "src-uri", "src-queue", "src-exchange", "src-exchange-key",
    "src-prefetch-count", "src-delete-after", "dest-protocol", "dest-uri", "dest-queue",
    "dest-exchange", "dest-exchange-key", "dest-add-forward-headers",
    "dest-add-timestamp-header", "dest-publish-properties", "ack-mode", "reconnect-delay",
    # RabbitMQ's older names, still accepted by it
    "prefetch-count", "delete-after", "add-forward-headers", "publish-properties",
    "add-timestamp-header",
})
PROPERTY_KEYS = frozenset({
    "content_type", "content_encoding", "headers", "delivery_mode", "priority",
    "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type",
    "user_id", "app_id", "cluster_id",
})


@dataclass(frozen=True)
class ShovelSpec:
    src_uris: tuple[str, ...]
    dest_uris: tuple[str, ...]
    src_queue: str | None = None
    src_exchange: str | None = None
    src_exchange_key: str = "#"
    dest_queue: str | None = None
    dest_exchange: str | None = None
    dest_exchange_key: str | None = None  # None: the message's own routing key
    ack_mode: str = "on-confirm"
    prefetch_count: int = 1000
    delete_after: str | int = "never"  # "never", "queue-length" or a count
    add_forward_headers: bool = False
    add_timestamp_header: bool = False
    publish_properties: dict[str, Any] = field(default_factory=dict)
    reconnect_delay: float = 5.0

    def source_endpoint_names(self) -> dict[str, str]:
        """The source and destination as status rows and forward headers name them."""
        out: dict[str, str] = {}
        if self.src_queue is not None:
            out["src-queue"] = self.src_queue
        else:
            out["src-exchange"] = self.src_exchange or ""
            out["src-exchange-key"] = self.src_exchange_key
        if self.dest_queue is not None:
            out["dest-queue"] = self.dest_queue
        else:
            out["dest-exchange"] = self.dest_exchange or ""
            if self.dest_exchange_key is not None:
                out["dest-exchange-key"] = self.dest_exchange_key
        return out


def _uris(value: dict[str, Any], key: str) -> tuple[str, ...]:
    raw = value.get(key)
    uris = [raw] if isinstance(raw, str) else raw
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise ValueError(f"{key} must be a URI or a non-empty list of URIs")
    for uri in uris:
        parse_uri(uri)  # ValueError, password masked, on a bad one
    return tuple(uris)


def _str(value: dict[str, Any], key: str) -> str | None:
    found = value.get(key)
    if found is not None and not isinstance(found, str):
        raise ValueError(f"{key} must be a string")
    return found


def _flag(value: dict[str, Any], key: str, old: str) -> bool:
    found = value.get(key, value.get(old, False))
    if not isinstance(found, bool):
        raise ValueError(f"{key} must be true or false")
    return found


def parse_spec(value: Any) -> ShovelSpec:
    """The shovel a parameter value describes; ValueError saying what is wrong."""
    if not isinstance(value, dict):
        raise ValueError("a shovel's value must be an object")
    unknown = sorted(set(value) - KNOWN)
    if unknown:
        raise ValueError(f"unknown shovel keys: {', '.join(unknown)}")
    for side in ("src", "dest"):
        protocol = value.get(f"{side}-protocol", "amqp091")
        if protocol != "amqp091":
            raise ValueError(f"{side}-protocol {protocol!r} is not supported (only amqp091)")
    src_queue, src_exchange = _str(value, "src-queue"), _str(value, "src-exchange")
    if (src_queue is None) == (src_exchange is None):
        raise ValueError("exactly one of src-queue and src-exchange must be given")
    dest_queue, dest_exchange = _str(value, "dest-queue"), _str(value, "dest-exchange")
    if dest_queue is not None and dest_exchange is not None:
        raise ValueError("at most one of dest-queue and dest-exchange may be given")
    ack_mode = value.get("ack-mode", "on-confirm")
    if ack_mode not in ACK_MODES:
        raise ValueError(f"ack-mode must be one of {', '.join(ACK_MODES)}")
    prefetch = value.get("src-prefetch-count", value.get("prefetch-count", 1000))
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 0 < prefetch < 65536:
        raise ValueError("src-prefetch-count must be a whole number from 1 to 65535")
    delete_after = value.get("src-delete-after", value.get("delete-after", "never"))
    if delete_after not in ("never", "queue-length") and (
        isinstance(delete_after, bool) or not isinstance(delete_after, int) or delete_after < 0
    ):
        raise ValueError("src-delete-after must be never, queue-length or a whole number")
    delay = value.get("reconnect-delay", 5)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise ValueError("reconnect-delay must be a number of seconds >= 0")
    props = value.get("dest-publish-properties", value.get("publish-properties", {}))
    if not isinstance(props, dict) or set(props) - PROPERTY_KEYS:
        raise ValueError(
            f"dest-publish-properties must be an object of {', '.join(sorted(PROPERTY_KEYS))}"
        )
    key = _str(value, "src-exchange-key")
    return ShovelSpec(
        src_uris=_uris(value, "src-uri"),
        dest_uris=_uris(value, "dest-uri"),
        src_queue=src_queue,
        src_exchange=src_exchange,
        src_exchange_key="#" if key is None else key,
        dest_queue=dest_queue,
        dest_exchange=dest_exchange,
        dest_exchange_key=_str(value, "dest-exchange-key"),
        ack_mode=ack_mode,
        prefetch_count=prefetch,
        delete_after=delete_after,
        add_forward_headers=_flag(value, "dest-add-forward-headers", "add-forward-headers"),
        add_timestamp_header=_flag(value, "dest-add-timestamp-header", "add-timestamp-header"),
        publish_properties=dict(props),
        reconnect_delay=float(delay),
    )


def local_endpoint(uri: str, port: int) -> Endpoint:
    """``uri`` as the client connects to it: one with no host (``amqp://``, RabbitMQ's
    "this broker") is this node's own AMQP listener on loopback, plain TCP, as the
    URI's user (guest when none is given)."""
    ep = parse_uri(uri)
    if ep.host:
        return ep
    return replace(ep, host="127.0.0.1", port=port, tls=False)


def masked(uri: str) -> str:
    """``uri`` without its user and password, for status rows and headers: RabbitMQ
    3.10 shows ``amqp://guest:pw@host:5672`` as ``amqp://host:5672``."""
    scheme, sep, rest = uri.partition("://")
    authority, slash, tail = rest.partition("/")
    hostport = authority.rpartition("@")[2]
    return f"{scheme}{sep}{hostport}{slash}{tail}"
