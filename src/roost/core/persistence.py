"""Durability wiring inside the core: stores for durable queues, definitions on disk,
recovery at start. Everything goes through the Protocols of ``core.durability``.

Which queues get a store: durable, not exclusive, not auto-delete. Only persistent
messages (delivery mode 2) are written. Definitions are saved (atomically, by the
``DefinitionsStore``) before the group commit that confirms anything published after
they changed, and otherwise at most every ``SAVE_EVERY`` seconds.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from roost.core.durability import DefinitionsStore, MessageStore
from roost.core.exchanges.delayed import DelayedExchange
from roost.core.info import StoreInfo
from roost.core.paging import Pager
from roost.core.queues.base import Queue

if TYPE_CHECKING:
    from roost.core.broker import Broker
    from roost.core.vhost import VHost

log = logging.getLogger("roost.store")

SAVE_EVERY = 0.2


def wants_store(queue: Queue) -> bool:
    """Streams keep their own log (core.queues.stream), so they get no message store."""
    return (
        queue.durable
        and not queue.exclusive
        and not queue.auto_delete
        and queue.kind != "stream"
    )


def persistable(data: dict[str, Any]) -> dict[str, Any]:
    """Drop what must not survive a restart: non-durable and auto-delete objects."""
    out = dict(data)
    kept_queues = {
        (q.get("vhost"), q["name"])
        for q in data.get("queues", [])
        if q.get("durable") and not q.get("auto_delete")
    }
    kept_exchanges = {
        (e.get("vhost"), e["name"])
        for e in data.get("exchanges", [])
        if e.get("durable") and not e.get("auto_delete")
    }
    out["queues"] = [
        q for q in data.get("queues", []) if (q.get("vhost"), q["name"]) in kept_queues
    ]
    out["exchanges"] = [
        e for e in data.get("exchanges", []) if (e.get("vhost"), e["name"]) in kept_exchanges
    ]

    def durable_end(vhost: Any, name: str, kind: str) -> bool:
        if kind == "queue":
            return (vhost, name) in kept_queues
        return name.startswith("amq.") or (vhost, name) in kept_exchanges

    out["bindings"] = [
        b
        for b in data.get("bindings", [])
        if durable_end(b.get("vhost"), b["source"], "exchange")
        and durable_end(b.get("vhost"), b["destination"], b["destination_type"])
    ]
    return out


class Persistence:
    def __init__(self, broker: Broker, store: MessageStore, definitions: DefinitionsStore) -> None:
        self.broker = broker
        self.store = store
        self.definitions = definitions
        self._dirty = False
        self._urgent = False
        self._last_save = 0.0
        self._save_cost = 0.0
        self._recovering = False
        self.recovered_messages = 0
        self.recovered_queues = 0
        self.pager = Pager(store, broker)

    def install(self) -> None:
        """Listen to every definition change (and to vhosts created later)."""
        self.broker.message_store = self.store
        self.broker.on_change.append(self._broker_changed)
        for vhost in self.broker.vhosts.values():
            self._watch(vhost)
        self.store.before_flush.append(self._maybe_save)
        self.broker.store_stats = self.store_info

    def store_info(self) -> StoreInfo:
        """Bytes, segments and the fsync latency histogram for /metrics."""
        stats = self.store.fsync_stats
        running = 0
        buckets = []
        for bound, count in zip(stats.bounds, stats.counts, strict=False):
            running += count
            buckets.append((bound, running))
        return StoreInfo(
            bytes_on_disk=self.store.bytes_on_disk,
            segments=self.store.segment_count,
            fsyncs=stats.count,
            fsync_buckets=tuple(buckets),
            fsync_seconds_sum=stats.total,
        )

    def _watch(self, vhost: VHost) -> None:
        vhost.pager = self.pager
        if self._vhost_changed not in vhost.on_change:
            vhost.on_change.append(self._vhost_changed)
            for queue in vhost.queues.values():
                self._attach(queue)

    def _broker_changed(self, kind: str, obj: Any) -> None:
        if kind == "vhost":
            self._watch(obj)
        self._mark_dirty()

    def _vhost_changed(self, kind: str, obj: Any) -> None:
        if kind == "queue":
            self._attach(obj)
        elif kind == "queue.deleted":
            store = obj.store
            if store is not None:
                obj.store = None
                store.destroy()
        elif isinstance(obj, DelayedExchange):
            self._delayed_changed(kind, obj)
        self._mark_dirty()

    def _delayed_changed(self, kind: str, ex: DelayedExchange) -> None:
        """A durable x-delayed-message exchange keeps its persistent messages in a store
        of its own (taking back, at recovery, what it held before)."""
        if kind == "exchange" and ex.durable and not ex.auto_delete and ex.store is None:
            ex.attach_store(self.store.open_delayed(ex.vhost, ex.name))
            if not self._recovering:
                self._urgent = True  # a confirm for a held message needs the definition
        elif kind == "exchange.deleted":
            store = ex.detach_store()
            if store is not None:
                store.destroy()

    def _mark_dirty(self) -> None:
        if self._recovering:
            return
        self._dirty = True

    # -- queues -----------------------------------------------------------------------

    def _attach(self, queue: Queue) -> None:
        if queue.store is not None or not wants_store(queue):
            return
        store = self.store.open_queue(queue.vhost.name, queue.name)
        queue.attach_store(store)

        count = store.recover(queue.restore)
        if self._recovering:
            self.recovered_messages += count
            self.recovered_queues += 1
        if not self._recovering:
            self._urgent = True  # a message confirmed in it needs its definition saved

    # -- definitions ------------------------------------------------------------------

    def _maybe_save(self) -> None:
        if not self._dirty:
            return
        now = time.monotonic()
        # a confirm waiting on a queue declared since the last save cannot wait; otherwise
        # save at most every SAVE_EVERY s, and never spend over a tenth of the time saving
        if (self._urgent and self.store.has_waiters) or now - self._last_save >= max(
            SAVE_EVERY, 10 * self._save_cost
        ):
            self.save()

    def save(self) -> None:
        self._dirty = self._urgent = False
        started = time.monotonic()
        try:
            self.definitions.save(persistable(self.broker.export_definitions()))
        except OSError as exc:
            self._dirty = True
            log.error("definitions: save failed: %s", exc)
        self._last_save = time.monotonic()
        self._save_cost = self._last_save - started

    def tick(self) -> None:
        """Called now and then by the server so quiet changes are saved too."""
        self._maybe_save()

    def recover(self) -> bool:
        """Load definitions (and with them every durable queue's messages).
        False when there was nothing saved (a first start)."""
        data = self.definitions.load()
        if data is None:
            return False
        started = time.monotonic()
        self._recovering = True
        try:
            report = self.broker.import_definitions(data, recovering=True)
        except Exception as exc:  # a damaged file must not stop the broker
            log.warning("definitions: import failed, some objects lost: %s", exc)
            report = None
        finally:
            self._recovering = False
        log.info(
            "recovered %d messages in %d queues in %.3f s (definitions: %s)",
            self.recovered_messages,
            self.recovered_queues,
            time.monotonic() - started,
            report.counts if report is not None else "damaged",
        )
        return True
