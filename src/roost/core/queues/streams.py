"""The broker's streams as a group: where their stores come from (injected by the server)
and bringing them back at start-up. Their appends join the store's group commit
(``StreamFiles``' ``on_write``), so a confirm waits for the fsync like any other."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core.durability import StreamStorage, StreamStore

if TYPE_CHECKING:
    from roost.core.queues.stream import StreamQueue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.stream")


class Streams:
    def __init__(self, storage: StreamStorage) -> None:
        # on disk, or in memory (store/memory.py) for a broker without a data directory
        self.storage = storage
        self.open: set[StreamQueue] = set()
        # per (vhost, stream): who is told once when the stream's leader moves to another
        # node (a cluster's replicated stream): the stream protocol's publishers, which
        # RabbitMQ sends a MetadataUpdate so that they ask Metadata where it is now
        self.watchers: dict[tuple[str, str], set[Callable[[], None]]] = {}

    def watch(self, vhost: str, name: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` once when the stream's leader moves; returns the unwatch."""
        key = (vhost, name)
        self.watchers.setdefault(key, set()).add(callback)

        def unwatch() -> None:
            found = self.watchers.get(key)
            if found is not None:
                found.discard(callback)
                if not found:
                    del self.watchers[key]

        return unwatch

    def moved(self, vhost: str, name: str) -> None:
        """The stream's leader is on another node now (roost.cluster tells)."""
        for callback in list(self.watchers.pop((vhost, name), ())):
            callback()

    def open_store(
        self,
        vhost: str,
        name: str,
        arguments: dict[str, Any],
        *,
        max_segment_bytes: int,
        max_bytes: int,
        max_age_ms: int,
    ) -> StreamStore:
        return self.storage.open_stream(
            vhost,
            name,
            arguments,
            max_segment_bytes=max_segment_bytes,
            max_bytes=max_bytes,
            max_age_ms=max_age_ms,
        )

    def close(self) -> None:
        for queue in list(self.open):
            queue.close()

    def recover(self, vhosts: dict[str, VHost]) -> int:
        """Reopen every stream the storage knows; a stream already declared (from the
        persisted definitions) is left alone."""
        from roost.core.queues.stream import StreamQueue

        count = 0
        for vhost_name, name, arguments in self.storage.saved_streams():
            vhost = vhosts.get(vhost_name)
            if vhost is None or name in vhost.queues:
                continue
            vhost.queues[name] = StreamQueue(vhost, name, durable=True, arguments=arguments)
            count += 1
        if count:
            log.info("recovered %d stream(s)", count)
        return count
