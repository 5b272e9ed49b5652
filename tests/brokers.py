"""Brokers built in process for unit tests, over the in-memory twin of every store
(roost/store/memory.py), as ``roost server --data-dir none`` builds its own."""

from __future__ import annotations

from roost.core.broker import Broker
from roost.core.durability import MessageStore, StreamStorage
from roost.core.settings import BrokerSettings
from roost.store.memory import MemoryStore, MemoryStreams


def memory_broker(
    settings: BrokerSettings | None = None,
    *,
    defaults: bool = True,
    store: MessageStore | None = None,
    stream_storage: StreamStorage | None = None,
) -> Broker:
    """``defaults``: vhost '/' and guest/guest on it (``Broker.with_defaults``)."""
    kinds = {
        "store": store if store is not None else MemoryStore(),
        "stream_storage": stream_storage if stream_storage is not None else MemoryStreams(),
    }
    return Broker.with_defaults(settings, **kinds) if defaults else Broker(settings, **kinds)
