"""Membership: each node registers under an etcd lease; a node whose lease is gone is down.

Keys under the cluster's prefix (``--cluster etcd://…/PREFIX``, default ``/roost``):

- ``nodes/live/NAME``: the node's record, attached to its lease (kept alive every third
  of ``--cluster-lease-ttl``). It vanishes when the node stops or its lease expires.
- ``nodes/known/NAME``: the same record without a lease, so a node that is down is still
  listed (``running: false``), as RabbitMQ lists a stopped cluster member.

A node that restarts after ``kill -9`` finds its previous lease's id in its data dir
(``cluster-lease``) and revokes it, so its name is free at once and the other nodes see
it go down and come back. A name held by another live process is refused.

A lease can expire while the node still runs: a loaded machine (or a long pause of its
event loop) keeps the keepalives from going out for a whole TTL, during start-up as well
as later. etcd then deletes the live key with the lease, and whatever the node writes
under that lease is refused ("requested lease not found"). The node takes a new lease and
registers again; the live key is only ever created when absent, so one name never has two
live registrations.

The fence (``lease.py``): a node that could not renew its lease for ``TTL - margin``
tells ``fence_listeners`` (``True``) to stop what it runs as an elected owner (dynamic
shovels, ``owners.py``), since the others may take it over once the lease expires; it
tells them ``False`` when a renewal comes back in time or the node has registered again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from roost.cluster.coordinator import Compare, Coordinator, Get, Put
from roost.cluster.errors import ClusterError
from roost.cluster.lease import LeaseKeeper

log = logging.getLogger("roost.cluster.membership")

LEASE_FILE = "cluster-lease"


@dataclass(frozen=True)
class NodeRecord:
    """What a node publishes about itself: enough for peers to dial it and for the
    management API to show it."""

    name: str
    host: str
    cluster_port: int
    amqp_port: int = 0
    http_port: int = 0
    pid: int = 0
    started_ms: int = 0
    version: str = ""
    # the stream protocol's advertised address (RabbitMQ's advertised_host/port): the
    # Metadata of a replicated stream sends clients to its leader's and replicas' nodes
    stream_host: str = ""
    stream_port: int = 0

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> NodeRecord:
        data = json.loads(raw)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class NodeStatus:
    record: NodeRecord
    running: bool

    @property
    def name(self) -> str:
        return self.record.name


Listener = Callable[[NodeRecord, bool], None]


class Membership:
    def __init__(
        self,
        coordinator: Coordinator,
        prefix: str,
        record: NodeRecord,
        *,
        ttl: int,
        data_dir: Path | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.prefix = prefix.rstrip("/")
        self.record = record
        self.ttl = ttl
        self.data_dir = data_dir
        self.lease_id = 0
        self.keeper: LeaseKeeper | None = None
        self.live: dict[str, NodeRecord] = {}
        self.known: dict[str, NodeRecord] = {}
        self.first = record.name  # the node that joined first: the cluster's default name
        self.listeners: list[Listener] = []
        self._watch: asyncio.Task[None] | None = None
        self._rejoin: asyncio.Task[None] | None = None
        self.fence_listeners: list[Callable[[bool], None]] = []
        self.fenced = False
        self._granted_at = 0.0  # monotonic time the current lease's grant was sent

    @property
    def nodes_prefix(self) -> str:
        return f"{self.prefix}/nodes/"

    def key(self, kind: str, name: str) -> str:
        return f"{self.nodes_prefix}{kind}/{name}"

    # -- joining and leaving

    async def join(self, wait_for_name: float | None = None) -> None:
        """Register this node (waiting up to ``wait_for_name`` seconds, default the lease
        TTL and a second, for a previous holder of the name to expire), then follow the
        others. Raises ``ClusterError`` when the name stays taken."""
        await self._revoke_previous()
        deadline = time.monotonic() + (self.ttl + 1.0 if wait_for_name is None else wait_for_name)
        while True:
            holder = await self._register()
            if holder is None:
                break
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"node name '{self.record.name}' is in use by a running node "
                    f"(pid {holder.pid} on {holder.host}, cluster port {holder.cluster_port})"
                )
            await asyncio.sleep(0.2)
        self._keep()
        kvs, revision = await self.coordinator.get_prefix(self.nodes_prefix)
        for kv in kvs:
            self._apply(kv.key, kv.value, notify=False)
        known = [kv for kv in kvs if kv.key.startswith(self.key("known", ""))]
        if known:  # known keys stay across restarts: the oldest is the first node's
            oldest = min(known, key=lambda kv: kv.create_revision)
            self.first = oldest.key.removeprefix(self.key("known", ""))
        self._watch = asyncio.get_running_loop().create_task(self._follow(revision + 1))
        log.info(
            "joined the cluster as '%s' (%d node(s) running)", self.record.name, len(self.live)
        )

    def _keep(self) -> None:
        lease = self.lease_id
        self.keeper = LeaseKeeper(
            self.coordinator, lease, self.ttl, lambda: self._lease_lost(lease),
            renewed_at=self._granted_at, on_fence=self._fence,
        )
        self.keeper.start()
        self._fence(not self.keeper.in_lease())

    def _fence(self, fenced: bool) -> None:
        if fenced == self.fenced:
            return
        self.fenced = fenced
        for listener in list(self.fence_listeners):
            try:
                listener(fenced)
            except Exception:
                log.exception("a fence listener failed")

    def in_lease(self) -> bool:
        """May this node act as an elected owner now: registered, and its lease renewed
        recently enough that no other node can have taken it for dead."""
        keeper = self.keeper
        return bool(self.lease_id) and keeper is not None and keeper.in_lease()

    async def _register(self) -> NodeRecord | None:
        """Put the live key under a fresh lease unless another holds the name: its
        record, then. A lease that expired before the put (granted, then the node
        starved for a TTL) is replaced by a new one."""
        while True:
            if not self.lease_id:
                self._granted_at = time.monotonic()
                self.lease_id = await self.coordinator.grant_lease(self.ttl)
                self._save_lease()
            live = self.key("live", self.record.name)
            raw = self.record.encode()
            try:
                result = await self.coordinator.txn(
                    [Compare(live, "create", 0)],
                    [
                        Put(live, raw, lease=self.lease_id),
                        Put(self.key("known", self.record.name), raw),
                    ],
                    [Get(live)],
                )
            except ClusterError as exc:
                if not lease_gone(exc):
                    raise
                log.warning(
                    "lease %x expired before this node registered; a new one", self.lease_id
                )
                self.lease_id = 0
                continue
            break
        if result.succeeded:
            return None
        holders = result.reads[0] if result.reads else []
        if holders and holders[0].lease == self.lease_id:
            return None
        return NodeRecord.decode(holders[0].value) if holders else None

    async def _revoke_previous(self) -> None:
        """The lease of this data dir's previous run (killed before it could revoke it)."""
        path = self._lease_path()
        if path is None or not path.exists():
            return
        with contextlib.suppress(ValueError):
            previous = int(path.read_text().strip(), 16)
            if previous:
                log.info("revoking this node's lease of its previous run (%x)", previous)
                await self.coordinator.revoke_lease(previous)

    def _lease_path(self) -> Path | None:
        return None if self.data_dir is None else Path(self.data_dir) / LEASE_FILE

    def _save_lease(self) -> None:
        path = self._lease_path()
        if path is None:
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(f"{self.lease_id:x}\n")
        os.replace(tmp, path)

    def _lease_lost(self, lease: int) -> None:
        """etcd dropped ``lease`` (this node could not renew it for a whole TTL): the
        others took this node for dead. Register again as soon as etcd answers. Said
        once per lease: by its keeper, or by a write refused under it, whichever first."""
        if lease != self.lease_id or not lease:
            return  # an older lease, already replaced (or being replaced)
        if self.keeper is not None:
            self.keeper.cancel()  # its lease is gone: nothing left to renew
        self.lease_id = 0
        self._fence(True)  # unfenced once registered again, under the new lease
        self._rejoin = asyncio.get_running_loop().create_task(self._register_again())

    async def registered(self) -> None:
        """Returns once this node is registered (at once unless it is re-registering
        after a lost lease)."""
        while self._rejoin is not None and not self._rejoin.done():
            await asyncio.shield(self._rejoin)

    async def update_record(self, record: NodeRecord) -> None:
        """Publish a changed record (the client ports once the listeners have them)
        under this node's lease; when that lease is gone, register again with a new
        one (which carries the new record) and return once registered."""
        self.record = record
        await self.registered()
        lease = self.lease_id
        raw = record.encode()
        try:
            await self.coordinator.txn(
                [],
                [
                    Put(self.key("live", record.name), raw, lease=lease),
                    Put(self.key("known", record.name), raw),
                ],
            )
        except ClusterError as exc:
            if not lease_gone(exc):
                raise
            log.warning("this node's etcd lease %x is gone; registering again", lease)
            self._lease_lost(lease)
        await self.registered()

    async def _register_again(self) -> None:
        delay = 0.2
        while True:
            try:
                holder = await self._register()
                if holder is None:
                    break
            except ClusterError as exc:
                log.debug("re-registering: %s", exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        self._keep()
        log.info("registered again as '%s' with a new lease", self.record.name)

    async def leave(self) -> None:
        """A graceful stop: revoke the lease (the node shows as down at once)."""
        for task in (self._watch, self._rejoin):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.keeper is not None:
            await self.keeper.stop(revoke=True)
        path = self._lease_path()
        if path is not None:
            path.unlink(missing_ok=True)

    # -- the view of the others

    async def _follow(self, revision: int) -> None:
        async for batch in self.coordinator.watch(self.nodes_prefix, revision):
            for change in batch:
                self._apply(change.key, change.value, notify=True)

    def _apply(self, key: str, value: bytes | None, *, notify: bool) -> None:
        kind, _, name = key[len(self.prefix) + len("/nodes/") :].partition("/")
        if kind == "known":
            if value is None:
                self.known.pop(name, None)
            else:
                self.known[name] = NodeRecord.decode(value)
            return
        if kind != "live":
            return
        if value is None:
            record = self.live.pop(name, None)
            if record is not None and notify:
                log.info("node '%s' is down", name)
                self._tell(record, False)
            return
        record = NodeRecord.decode(value)
        before = self.live.get(name)
        self.live[name] = record
        if notify and before != record:
            if before is None:
                log.info("node '%s' is up (%s:%d)", name, record.host, record.cluster_port)
            self._tell(record, True)

    def _tell(self, record: NodeRecord, running: bool) -> None:
        for listener in list(self.listeners):
            try:
                listener(record, running)
            except Exception:
                log.exception("a membership listener failed on node '%s'", record.name)

    def nodes(self) -> list[NodeStatus]:
        """Every node ever joined (not forgotten), running or not, sorted by name."""
        names = sorted(set(self.known) | set(self.live))
        return [NodeStatus(self.live.get(n) or self.known[n], n in self.live) for n in names]

    def running(self) -> list[NodeRecord]:
        return [self.live[n] for n in sorted(self.live)]

    @property
    def reachable(self) -> bool:
        """False while this node cannot renew its lease (etcd out of reach)."""
        return self.keeper is not None and self.keeper.reachable


def lease_gone(exc: ClusterError) -> bool:
    """etcd refused a write because the lease it names no longer exists."""
    return "lease not found" in str(exc)
