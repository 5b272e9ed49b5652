"""Definitions live in etcd: every node's view of vhosts, users, permissions, policies,
limits, exchanges, queues and bindings is the keys under ``PREFIX/defs/``.

A change made on this node (a declare, a bind, an HTTP PUT) is applied locally first, as
on a single node, and announced by its typed event (core/events.py); this module turns
the event into one etcd transaction and hands the core a ``Pending`` operation, so the
reply waits (``Completion``) until etcd committed it. Queues and exchanges are created
with a compare-and-swap (the key must not exist yet): when two nodes race to declare the
same queue with different arguments, one transaction wins and the other node replaces
its local object with the winner's and fails its caller's reply with the 406 a single
node gives. Everything else is last-writer-wins, as RabbitMQ's own definitions are.

Every node follows the keys with one watch from the revision of its start-up snapshot
and applies the others' changes to its in-memory view; a queue homed on another node
becomes that node's stand-in (``roost.cluster.stand_in.RemoteQueue``).

Writes go to etcd one at a time, in the order the changes were made, so a bind never
reaches etcd before the declare of its queue. A watched change of a key this node is
still writing, or has written at a later revision, is its own echo and is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from roost.cluster.applied import Applied
from roost.cluster.coordinator import Compare, Delete, Get, KeyValue, Put
from roost.cluster.errors import ClusterError
from roost.cluster.placement import balanced_home, wants_balanced
from roost.cluster.remote_changes import Item, RemoteChanges, RemoteFactory
from roost.cluster.startup import departed, survivors
from roost.core.definitions import (
    ORDER,
    export_definitions,
    queue_item,
)
from roost.core.errors import BrokerError, InternalError, PreconditionFailed, ResourceLocked
from roost.core.events import (
    Event,
    QueueDeclared,
    VHostChanged,
)
from roost.core.journal import KEYS, Changes

if TYPE_CHECKING:
    from roost.cluster.coordinator import Coordinator
    from roost.cluster.link.transport import Link, LinkManager
    from roost.core.broker import Broker
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.definitions")

# For tests only: seconds this node waits before applying each batch its watch hands over
# (a node slow to read its watch, as one was once under load), to widen the window in
# which another node's declare-ok could go out before this node knows the queue
# (tests/cluster/test_quorum_reregistered.py). 0, the default, in any real use.
WATCH_LAG = float(os.environ.get("ROOST_TEST_DEFINITIONS_LAG") or 0)




@dataclass(slots=True)
class Write:
    number: int  # the Pending operation the caller's reply waits for
    section: str
    key: str
    item: Item | None  # None: deleted
    home: str = ""  # a queue's home node when not this one (x-queue-leader-locator)


class ClusterDefinitions(RemoteChanges):
    def __init__(
        self,
        coordinator: Coordinator,
        prefix: str,
        node: str,
        broker: Broker,
        links: LinkManager | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.applied = Applied(links)  # what the other running nodes have applied
        self.root = f"{prefix}/defs/"
        self.node = node
        self.broker = broker
        self.catalog = broker.catalog
        self._changes = Changes(broker.catalog)
        self._applying = 0
        self._writes: asyncio.Queue[Write] = asyncio.Queue()
        self._inflight: dict[str, int] = {}  # etcd key -> our writes not yet answered
        self._own: dict[str, int] = {}  # etcd key -> revision of our last write to it
        self._tasks: list[asyncio.Task[None]] = []
        self.remote_factory: RemoteFactory | None = None
        self.running: Callable[[], list[str]] = lambda: [node]  # running nodes' names
        self.revision = 0  # the last revision applied

    # -- keys -----------------------------------------------------------------------------

    def key(self, section: str, item: Item) -> str:
        parts = KEYS[section](item)
        return self.root + section + "/" + "/".join(quote(str(p), safe="") for p in parts)

    def _parse(self, key: str) -> tuple[str, list[str]]:
        section, _, rest = key[len(self.root) :].partition("/")
        return section, [unquote(p) for p in rest.split("/")]

    # -- start ------------------------------------------------------------------------

    async def start(self, *, alone: bool = False, volatile: bool = False) -> None:
        """Apply what etcd holds, give etcd what only this node has (its first start, or
        its durable queues), then follow changes and write this node's own. ``alone``:
        no other node is running, so the cluster's transient exchanges went with the
        last one (as in RabbitMQ); this node's own transient queues always did, and all
        of its queues when it keeps nothing on disk (``volatile``: --data-dir none)."""
        kvs, revision = await self.coordinator.get_prefix(self.root)
        kvs = await self._drop_transient(kvs, alone, volatile)
        held = {kv.key for kv in kvs}
        by_section: dict[str, list[KeyValue]] = {}
        for kv in kvs:
            by_section.setdefault(self._parse(kv.key)[0], []).append(kv)
        for section in ORDER:
            for kv in by_section.get(section, []):
                self._apply_put(section, kv.value)
        self.revision = revision
        self.catalog.on_change.append(self._broker_changed)
        for vhost in self.catalog.vhosts.values():
            self._follow_vhost(vhost)
        await self._seed(held)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._writer()),
            loop.create_task(self._watch(revision + 1)),
        ]

    async def _drop_transient(
        self, kvs: list[KeyValue], alone: bool, volatile: bool
    ) -> list[KeyValue]:
        """Delete from etcd what did not survive this node's stop (``survivors``)."""
        kept, dropped = survivors(kvs, self._parse, self.node, alone=alone, volatile=volatile)
        if dropped:
            await self.coordinator.txn([], [Delete(kv.key) for kv in dropped])
        return kept

    async def _seed(self, held: set[str]) -> None:
        doc = export_definitions(self.catalog)
        for section in ORDER:
            for item in doc.get(section, []):
                if not isinstance(item, dict):
                    continue
                if section == "queues":
                    vhost = self.catalog.vhosts.get(item["vhost"])
                    queue = None if vhost is None else vhost.queues.get(item["name"])
                    if queue is None or queue.remote:
                        continue
                key = self.key(section, item)
                if key in held:
                    continue
                raw = self._encode(item, self.node)
                await self.coordinator.txn([Compare(key, "create", 0)], [Put(key, raw)])

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    # -- this node's changes ------------------------------------------------------------

    def _broker_changed(self, event: Event) -> None:
        if isinstance(event, VHostChanged):
            self._follow_vhost(event.vhost)
        self._changed(event)

    def _follow_vhost(self, vhost: VHost) -> None:
        if self._changed not in vhost.on_change:
            vhost.on_change.append(self._changed)

    def _changed(self, event: Event) -> None:
        if self._applying:
            return  # a change etcd told us of: already there
        found = self._changes.describe(event) or _exclusive(event)
        if found is None:
            return
        section, item, gone = found
        key = self.key(section, item)
        home = ""
        if isinstance(event, QueueDeclared) and not gone:
            policy = self.catalog.policy_definition(item["vhost"], "queue", item["name"])
            if wants_balanced(item["arguments"], policy):
                home = self._place(event.queue, item)
        number = self.broker.pending.issue()
        self._inflight[key] = self._inflight.get(key, 0) + 1
        self._writes.put_nowait(Write(number, section, key, None if gone else item, home))

    def _place(self, queue: Queue, item: Item) -> str:
        """A balanced queue's home; another node's: the queue here becomes its stand-in
        now, and that node makes the queue when it applies the write."""
        homes = [
            getattr(q, "home", self.node) if q.remote else self.node
            for v in self.catalog.vhosts.values()
            for q in v.queues.values()
            if q is not queue
        ]
        home = balanced_home(self.node, self.running(), homes)
        if home == self.node:
            return ""
        with self._apply():
            self._put_remote_queue(item, home)
        return home

    async def _writer(self) -> None:
        while True:
            write = await self._writes.get()
            error: BrokerError | None = None
            try:
                error = await self._write(write)
                if error is None:
                    await self.applied.everywhere(self._own.get(write.key, 0))
            except ClusterError as exc:
                log.warning("definition change not written to etcd: %s", exc)
                error = InternalError(f"the cluster could not record the change: {exc}")
                self._undo(write)
            except Exception:  # a bug must not stop every later write
                log.exception("definition change %s", write.key)
                error = InternalError("the cluster could not record the change")
            finally:
                left = self._inflight.get(write.key, 1) - 1
                if left:
                    self._inflight[write.key] = left
                else:
                    self._inflight.pop(write.key, None)
            self.broker.pending.finish(write.number, error)

    async def _write(self, write: Write) -> BrokerError | None:
        key, item = write.key, write.item
        if item is None:
            result = await self.coordinator.txn([], [Delete(key)])
            self._own[key] = result.revision
            return None
        raw = self._encode(item, write.home or self.node)
        if write.section not in ("queues", "exchanges"):
            result = await self.coordinator.txn([], [Put(key, raw)])
            self._own[key] = result.revision
            return None
        # created only if absent: of two nodes racing, one wins
        result = await self.coordinator.txn(
            [Compare(key, "create", 0)], [Put(key, raw)], [Get(key)]
        )
        self._own[key] = result.revision
        if result.succeeded:
            return None
        current = result.reads[0][0].value if result.reads and result.reads[0] else None
        if current is None:  # deleted meanwhile: ours stands
            await self.coordinator.txn([], [Put(key, raw)])
            return None
        theirs = json.loads(current)
        if theirs["item"] == item and theirs["node"] == (write.home or self.node):
            return None  # ours already (seeded, or written before a restart)
        return self._lost_race(write.section, item, current)

    def _lost_race(self, section: str, ours: Item, winner: bytes) -> BrokerError | None:
        """Another node declared it first: its declaration replaces ours here; our caller
        gets the 406 an inequivalent redeclare gets (None when equivalent), or 405 when
        either is exclusive (another connection's)."""
        vhost = self.catalog.vhosts.get(ours["vhost"])
        if section == "queues" and (ours.get("exclusive") or b'"exclusive": true' in winner):
            with self._apply():
                self._apply_put(section, winner)
            return ResourceLocked(
                f"cannot obtain exclusive access to locked queue '{ours['name']}' in vhost "
                f"'{ours['vhost']}'. It could be originally declared on another connection "
                "or the exclusive property value does not match that of the original "
                "declaration."
            )
        if vhost is None:
            return None
        with self._apply():
            if section == "exchanges":
                with contextlib.suppress(BrokerError):
                    vhost.delete_exchange(ours["name"])
            self._apply_put(section, winner)  # a queue: replaces ours with its stand-in
            try:
                if section == "queues":
                    vhost.declare_queue(
                        ours["name"],
                        durable=ours["durable"],
                        auto_delete=ours["auto_delete"],
                        arguments=ours["arguments"],
                        limited=False,
                    )
                else:
                    vhost.declare_exchange(
                        ours["name"],
                        ours["type"],
                        durable=ours["durable"],
                        auto_delete=ours["auto_delete"],
                        internal=ours["internal"],
                        arguments=ours["arguments"],
                        limited=False,
                    )
            except PreconditionFailed as exc:
                return exc
        return None

    def _undo(self, write: Write) -> None:
        """etcd did not take a new queue or exchange: it does not exist here either."""
        item = write.item
        if item is None or write.section not in ("queues", "exchanges"):
            return
        vhost = self.catalog.vhosts.get(item["vhost"])
        if vhost is None:
            return
        with self._apply(), contextlib.suppress(BrokerError):
            if write.section == "queues":
                vhost.delete_queue_named(item["name"], client=None)
            else:
                vhost.delete_exchange(item["name"])

    async def drop_departed(self, peer: str) -> None:
        """``peer`` went down: its transient queues go from the cluster (``departed``);
        every node, this one too, applies the deletes from its watch."""
        try:
            kvs, _revision = await self.coordinator.get_prefix(self.root)
            gone = departed(kvs, self._parse, peer)
            if gone:
                log.info("node '%s' is down: its %d transient definitions go", peer, len(gone))
                await self.coordinator.txn([], [Delete(kv.key) for kv in gone])
        except ClusterError as exc:  # it goes when that node starts again
            log.warning("transient queues of node '%s' not deleted: %s", peer, exc)

    def link_up(self, link: Link) -> None:
        self.applied.tell(link, self.revision)

    # -- the others' changes ------------------------------------------------------------

    def behind(self) -> bool:
        """A peer said it applied a newer revision than this node has: a declare-ok or
        bind-ok may have gone out (its wait is capped, ``applied.py``) for a change this
        node does not know yet, so a publish it routes nowhere may be one that a client
        believes routed (the core nacks it, ``Messaging.behind``)."""
        own = self.revision
        return any(r > own for r in self.applied.peer_revision.values())

    async def _watch(self, revision: int) -> None:
        async for batch in self.coordinator.watch(self.root, revision):
            if WATCH_LAG:
                await asyncio.sleep(WATCH_LAG)
            for change in batch:
                key = change.key
                self.revision = max(self.revision, change.revision)
                if self._inflight.get(key) or change.revision <= self._own.get(key, 0):
                    continue  # our own write's echo (or older than it)
                section, parts = self._parse(key)
                if change.value is None:
                    self._apply_delete(section, parts)
                else:
                    self._apply_put(section, change.value)
            self.applied.tell_all(self.revision)

    @staticmethod
    def _encode(item: Item, node: str) -> bytes:
        return json.dumps({"item": item, "node": node}, sort_keys=True, default=str).encode()


def _exclusive(event: Event) -> tuple[str, Item, bool] | None:
    """An exclusive queue's declaration, kept in etcd while its connection lives (marked
    ``exclusive``) so that every node answers another connection 405 RESOURCE_LOCKED, as
    RabbitMQ's cluster does; it is never recreated (``startup``: not durable)."""
    if isinstance(event, QueueDeclared) and event.queue.exclusive_owner is not None:
        q = event.queue
        return "queues", {**queue_item(q.vhost.name, q), "exclusive": True}, False
    return None
