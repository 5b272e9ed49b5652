"""Exchange types. ``make_exchange`` picks the class for a type name."""

from __future__ import annotations

from typing import Any

from roost.core.errors import CommandInvalid
from roost.core.exchanges.base import Exchange
from roost.core.exchanges.consistent_hash import ConsistentHashExchange
from roost.core.exchanges.deduplication import DeduplicationExchange
from roost.core.exchanges.delayed import DelayedExchange
from roost.core.exchanges.direct import DirectExchange
from roost.core.exchanges.fanout import FanoutExchange
from roost.core.exchanges.headers import HeadersExchange
from roost.core.exchanges.topic import TopicExchange

EXCHANGE_TYPES: dict[str, type[Exchange]] = {
    cls.kind: cls
    for cls in (
        DirectExchange,
        FanoutExchange,
        TopicExchange,
        HeadersExchange,
        ConsistentHashExchange,
        DelayedExchange,
        DeduplicationExchange,
    )
}


def exchange_class(kind: str) -> type[Exchange]:
    try:
        return EXCHANGE_TYPES[kind]
    except KeyError:
        raise CommandInvalid(f"invalid exchange type '{kind}'") from None


def make_exchange(
    vhost: str,
    name: str,
    kind: str,
    *,
    durable: bool = False,
    auto_delete: bool = False,
    internal: bool = False,
    arguments: dict[str, Any] | None = None,
) -> Exchange:
    return exchange_class(kind)(vhost, name, durable, auto_delete, internal, arguments or {})


__all__ = ["EXCHANGE_TYPES", "Exchange", "exchange_class", "make_exchange"]
