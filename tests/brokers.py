"""Brokers built in process for unit tests, over the in-memory twin of every store
(roost/store/memory.py), as ``roost server --data-dir none`` builds its own."""

from __future__ import annotations

from roost.core.alarms import ResourceAlarms
from roost.core.broker import Broker
from roost.core.durability import MessageStore, StreamStorage
from roost.core.settings import BrokerSettings
from roost.server_storage import map_stream_messages
from roost.store.memory import MemoryStore
from roost.store.memory_streams import MemoryStreams


def memory_broker(
    settings: BrokerSettings | None = None,
    *,
    defaults: bool = True,
    store: MessageStore | None = None,
    stream_storage: StreamStorage | None = None,
    alarms: ResourceAlarms | None = None,
) -> Broker:
    """``defaults``: vhost '/' and guest/guest on it (``Broker.with_defaults``);
    ``alarms``: a test's own (``defaults=False`` only), else made from the settings.
    Stream chunk records map AMQP 1.0 messages as the server's do (map_stream_messages)."""
    map_stream_messages()
    kinds = {
        "store": store if store is not None else MemoryStore(),
        "stream_storage": stream_storage if stream_storage is not None else MemoryStreams(),
    }
    assert alarms is None or not defaults
    return Broker.with_defaults(settings, **kinds) if defaults else Broker(
        settings, alarms=alarms, **kinds
    )
