"""The broker's streams as a group: where their stores come from (injected by the server)
and bringing them back at start-up. Their appends join the store's group commit
(``StreamFiles``' ``on_write``), so a confirm waits for the fsync like any other."""

from __future__ import annotations

import logging
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
