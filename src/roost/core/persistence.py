"""Durability wiring inside the core: stores for durable queues, definitions on disk,
recovery at start. Everything goes through the Protocols of ``core.durability``.

Which queues get a store: durable, not exclusive, not auto-delete. Only persistent
messages (delivery mode 2) are written.

Definitions are journaled (core/journal.py): each change to what a restart recreates is
counted as a store change at once (``MessageStore.changed``), and the next group commit
writes its record before the fsync pass, so whoever waits for that commit (a declare-ok,
an HTTP reply, a publisher confirm) waits for the definition to be on disk too. When the
journal has grown past the snapshot (and ``COMPACT_MIN``) a new snapshot replaces both.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from roost.core.definition_items import item_recreated, queue_item, recreated
from roost.core.definitions import export_definitions, import_definitions
from roost.core.definitions_schema import ORDER
from roost.core.durability import DefinitionsStore, MessageStore
from roost.core.events import (
    Event,
    ExchangeDeclared,
    ExchangeDeleted,
    QueueDeclared,
    QueueDeleted,
    VHostChanged,
)
from roost.core.exchanges.delayed import DelayedExchange
from roost.core.journal import Changes, replay
from roost.core.queues.base import Queue

if TYPE_CHECKING:
    from roost.core.broker import Broker
    from roost.core.vhost import VHost

log = logging.getLogger("roost.store")

COMPACT_MIN = 1 << 20  # journal bytes before a snapshot is worth writing
STORE_MARK = "roost_store"  # a saved queue's note that it has a data directory


def wants_store(queue: Queue) -> bool:
    """Streams keep their own log (core.queues.stream), so they get no message store."""
    return recreated(queue) and queue.kind != "stream" and not queue.remote


def persistable(data: dict[str, Any]) -> dict[str, Any]:
    """Drop what must not survive a restart: non-durable objects and auto-delete queues."""
    out = dict(data)
    kept_queues = {
        (q.get("vhost"), q["name"]) for q in data.get("queues", []) if item_recreated(q, "queues")
    }
    kept_exchanges = {
        (e.get("vhost"), e["name"])
        for e in data.get("exchanges", [])
        if item_recreated(e, "exchanges")
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
        self.changes = Changes(broker.catalog)
        self._recovering = False
        # queues the files say have a data directory, with their last known count
        self._stored_counts: dict[tuple[Any, Any], int | None] = {}
        self.recovered_messages = 0
        self.recovered_queues = 0

    def install(self) -> None:
        """Listen to every definition change (and to vhosts created later)."""
        self.broker.catalog.on_change.append(self._broker_changed)
        for vhost in self.broker.vhosts.values():
            self._watch(vhost)
        self.store.before_flush.append(self._write_changes)

    def _watch(self, vhost: VHost) -> None:
        if self._vhost_changed not in vhost.on_change:
            vhost.on_change.append(self._vhost_changed)
            for queue in vhost.queues.values():
                self._attach(queue)

    def _broker_changed(self, event: Event) -> None:
        if isinstance(event, VHostChanged):
            self._watch(event.vhost)
        self._note(event)

    def _vhost_changed(self, event: Event) -> None:
        match event:
            case QueueDeclared(queue=queue):
                self._attach(queue)
            case QueueDeleted(queue=queue):
                store = queue.store
                if store is not None:
                    queue.store = None
                    store.destroy()
            case ExchangeDeclared(exchange=DelayedExchange() as ex):
                self._delayed_changed(ex, deleted=False)
            case ExchangeDeleted(exchange=DelayedExchange() as ex):
                self._delayed_changed(ex, deleted=True)
        self._note(event)

    def _note(self, event: Event) -> None:
        """A change the next group commit journals: counted as a store change now, so a
        reply that waits for durability (core.broker) waits for it."""
        if not self._recovering and self.changes.note(event):
            self.store.changed()

    def _delayed_changed(self, ex: DelayedExchange, *, deleted: bool) -> None:
        """A durable x-delayed-message exchange keeps its persistent messages in a store
        of its own (taking back, at recovery, what it held before)."""
        if not deleted and recreated(ex) and ex.store is None:
            ex.attach_store(self.store.open_delayed(ex.vhost, ex.name))
        elif deleted:
            store = ex.detach_store()
            if store is not None:
                store.destroy()

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
            self._check_directory(queue, store.has_files)
        if not store.has_files:
            store.on_first_write = lambda: self._queue_has_data(queue)

    def _queue_has_data(self, queue: Queue) -> None:
        """The queue's first write makes its data directory: journal that it has one, so
        that a restart that finds it missing says what was lost."""
        if queue.deleted:
            return
        item = queue_item(queue.vhost.name, queue)
        item[STORE_MARK] = {"messages": None}  # counted at the next snapshot
        self.changes.put("queues", item)
        self.store.changed()

    @staticmethod
    def _marked(item: dict[str, Any], queue: Queue) -> dict[str, Any]:
        store = queue.store
        if store is not None and store.has_files:
            item[STORE_MARK] = {"messages": store.count}
        return item

    def _check_directory(self, queue: Queue, present: bool) -> None:
        key = (queue.vhost.name, queue.name)
        if present or key not in self._stored_counts:
            return
        count = self._stored_counts[key]
        log.error(
            "queue '%s' in vhost '%s': data directory missing, its messages are lost (%s)",
            queue.name,
            queue.vhost.name,
            "how many is unknown: no snapshot since its first message"
            if count is None
            else f"{count} at the last definitions snapshot",
        )

    # -- definitions ------------------------------------------------------------------

    def _write_changes(self) -> None:
        """Before each group commit's writes: journal the pending changes, or write a
        snapshot when the journal has outgrown it. An OSError propagates to the store,
        which retries (no space) or fails the waiting replies."""
        if not self.changes.pending:
            return
        records = self.changes.records()
        try:
            self.definitions.append(records)
        except OSError:
            self.changes.restore(records)
            raise
        journal = self.definitions.journal_size
        if journal > max(COMPACT_MIN, 2 * self.definitions.snapshot_size):
            self.save()

    def snapshot(self) -> dict[str, Any]:
        """What the definitions file holds: the export minus what must not survive a
        restart, with each queue's data-directory mark."""
        data = persistable(export_definitions(self.broker.catalog))
        for item in data["queues"]:
            vhost = self.broker.vhosts.get(item["vhost"])
            queue = vhost.queues.get(item["name"]) if vhost is not None else None
            if queue is not None:
                self._marked(item, queue)
        return data

    def save(self) -> None:
        """A full snapshot (at start, shutdown, and when the journal has grown)."""
        started = time.monotonic()
        if self.changes.pending:
            # journaled first all the same: the old journal becomes the .prev, which
            # must hold every change since the .bak (store/definitions.py)
            records = self.changes.records()
            try:
                self.definitions.append(records)
            except OSError as exc:
                log.warning("definitions: journal not written before the snapshot: %s", exc)
        data = self.snapshot()
        try:
            self.definitions.save(data)
        except OSError as exc:
            log.error("definitions: snapshot failed (the journal stands): %s", exc)
            return
        self.changes.stored_from(data)
        log.debug("definitions: snapshot in %.3f s", time.monotonic() - started)

    def recover(self) -> bool:
        """Load definitions (and with them every durable queue's messages).
        False when there was nothing saved (a first start)."""
        loaded = self.definitions.load()
        if loaded is None:
            return False
        base, records = loaded
        data = replay(base, records)
        for item in data.get("queues", []):
            mark = item.get(STORE_MARK) if isinstance(item, dict) else None
            if isinstance(mark, dict):
                count = mark.get("messages")
                key = (item.get("vhost"), item.get("name"))
                self._stored_counts[key] = count if isinstance(count, int) else None
        started = time.monotonic()
        self._recovering = True
        try:
            failed = self._import(data)
        finally:
            self._recovering = False
        log.info(
            "recovered %d messages in %d queues in %.3f s (definitions: %s)",
            self.recovered_messages,
            self.recovered_queues,
            time.monotonic() - started,
            ", ".join(f"{k} {len(v)}" for k, v in data.items() if isinstance(v, list) and v)
            or "none",
        )
        if failed:
            aside = self.definitions.keep_evidence()
            log.error(
                "definitions: %d objects could not be recreated (see above); the files"
                " as read are kept as %s",
                failed,
                aside.name,
            )
        if base is None or records or failed or self.definitions.damaged:
            self.save()  # one consistent snapshot from what was recovered
        else:
            self.changes.stored_from(data)
        return bool(self.broker.vhosts)  # none: the server adds RabbitMQ's defaults

    def _import(self, data: dict[str, Any]) -> int:
        """Import everything; if that fails, each object on its own, so that one bad
        object costs only itself. The number of objects that failed."""
        try:
            import_definitions(self.broker.catalog, self.broker, data, recovering=True)
            return 0
        except Exception as exc:  # a damaged file must not stop the broker
            log.warning("definitions: import failed (%s); importing object by object", exc)
        failed = 0
        for section in ORDER:
            items = data.get(section)
            if not isinstance(items, list):
                continue
            for item in items:
                try:
                    import_definitions(
                        self.broker.catalog, self.broker, {section: [item]}, recovering=True
                    )
                except Exception as exc:
                    failed += 1
                    log.error("definitions: %s %r not recreated: %s", section[:-1], item, exc)
        return failed

