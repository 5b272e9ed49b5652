"""What the quorum queues' manager and the replicated streams' groups share: the etcd
keys of a group, its election under this node's lease, the write that makes this node a
queue's home, the members' positions on failover, and the per-queue tasks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from roost.cluster.coordinator import Put
from roost.cluster.election import Election
from roost.cluster.errors import ClusterError
from roost.cluster.quorum.candidacy import may_campaign
from roost.cluster.quorum.role import STEPDOWN_TTLS
from roost.cluster.quorum.standin import QuorumGroup
from roost.core.events import VHostChanged

if TYPE_CHECKING:
    from collections.abc import Iterable

    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode
    from roost.core.events import Event

log = logging.getLogger("roost.cluster.quorum")

POSITIONS_WAIT = 0.3  # seconds for the surviving members to write their positions

Key = tuple[str, str]  # (vhost, queue)


class GroupBase:
    """Subclasses set ``kind`` ("queue" or "stream", for logs) and ``leaders`` (the etcd
    folder of their elections), and implement ``_follow_leader``."""

    kind = "queue"
    leaders = "leaders"
    records = "quorum"  # the etcd folder of the group records
    node: ClusterNode
    defs: Any
    prefix: str
    leading: dict[Key, Any]
    following: dict[Key, Any]
    tasks: dict[Key, asyncio.Task[None]]
    groups: dict[Key, QuorumGroup]

    @property
    def name(self) -> str:
        return self.node.name

    def _key(self, kind: str, key: Key) -> str:
        return f"{self.prefix}/{kind}/{quote(key[0], safe='')}/{quote(key[1], safe='')}"

    def _running(self) -> list[str]:
        return [n.name for n in self.node.membership.running()] if self.node.membership else []

    def _election(self, key: Key) -> Election:
        m = self.node.membership
        lease = m.lease_id if m is not None else 0
        return Election(self.node.coordinator, self._key(self.leaders, key), self.name, lease)

    def _group_at(self, key: Key, home: str) -> QuorumGroup:
        """The group a stand-in shows: led by ``home``, its members read from etcd."""
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = QuorumGroup(home, [home], self._running)
            self._spawn(key, self._read_group(key, group), replace=False)
        group.leader = home
        return group

    async def _read_group(self, key: Key, group: QuorumGroup) -> None:
        for _ in range(50):  # the leader writes the record just after its election
            kv = await self.node.coordinator.get(self._key(self.records, key))
            if kv is not None:
                group.members = json.loads(kv.value)["members"]
                return
            await asyncio.sleep(0.1)

    def _broker_changed(self, event: Event) -> None:
        if isinstance(event, VHostChanged) and self._changed not in event.vhost.on_change:
            event.vhost.on_change.append(self._changed)

    def _changed(self, event: Event) -> None:
        raise NotImplementedError

    async def _home_here(self, key: Key, ops: list[Put]) -> None:
        """Adds to ``ops`` the write that makes this node the home of the queue's
        definition (every node's stand-in follows it)."""
        defs_key = self.defs.key("queues", {"vhost": key[0], "name": key[1]})
        kv = await self.node.coordinator.get(defs_key)
        if kv is not None:
            envelope = json.loads(kv.value)
            envelope["node"] = self.name
            ops.append(Put(defs_key, json.dumps(envelope, sort_keys=True).encode()))

    async def _positions_allow(
        self, pos_prefix: str, group_key: str, mine: tuple[int, int], fence: int
    ) -> bool:
        """Writes this member's position under ``pos_prefix`` and reads those the
        members wrote since the leader's key went (after the vanished leader's term, a
        revision; ``group_key``: the group record naming the members and that term);
        True when a majority's are in and no running member is ahead (``candidacy.py``)."""
        coordinator = self.node.coordinator
        mine_key = pos_prefix + quote(self.name, safe="")
        await coordinator.put(mine_key, json.dumps(list(mine)).encode())
        await asyncio.sleep(POSITIONS_WAIT)
        kv = await coordinator.get(group_key)
        record = json.loads(kv.value) if kv is not None else {}
        members = record.get("members") or [self.name]
        since = max(fence, int(record.get("term", 0)))
        rows, _rev = await coordinator.get_prefix(pos_prefix)
        written = {
            unquote(row.key.rsplit("/", 1)[-1]): (int(pos[0]), int(pos[1]))
            for row in rows
            if row.mod_revision > since and len(pos := json.loads(row.value)) == 2
        }
        return may_campaign(self.name, mine, written, members, self._running())

    def _arm_stepdown(self, key: Key, rep: Any) -> None:
        """Before ``rep.started``: a leader without a majority resigns (``role.py``)."""
        m = self.node.membership
        rep.stepdown_after = float(STEPDOWN_TTLS * m.ttl) if m is not None else 0.0
        rep.running = self._running
        rep.on_lost_majority = lambda: self._spawn(key, self._resign(key, rep))

    async def _resign(self, key: Key, rep: Any) -> None:
        """``rep`` stepped down: its election key goes, so the members campaign."""
        if self.leading.get(key) is rep:
            del self.leading[key]
        election = self._election(key)
        election.term = rep.term
        try:
            await election.resign()
        except ClusterError as exc:  # etcd out of reach too: the lease will expire
            log.warning("%s %s: could not resign (%s)", self.kind, key, exc)

    def _link_up(self, link: Link) -> None:
        for rep in self.leading.values():
            rep.resync(link.peer)

    async def _watch_leader(self, key: Key, follower: Any) -> None:
        """A member's watch of its leader, again after an etcd failure (this node's
        lease lost and renewed after a pause, etcd out of reach)."""
        while self.following.get(key) is follower:
            try:
                await self._follow_leader(key, follower)
                return
            except ClusterError as exc:
                log.info("%s %s: watching the leader again (%s)", self.kind, key, exc)
                await asyncio.sleep(1.0)

    async def _follow_leader(self, key: Key, follower: Any) -> None:
        raise NotImplementedError

    def _spawn(self, key: Key, work: Any, replace: bool = True) -> None:
        task = asyncio.get_running_loop().create_task(work)
        if replace:
            old = self.tasks.pop(key, None)
            if old is not None and old is not asyncio.current_task():
                old.cancel()
            self.tasks[key] = task
        task.add_done_callback(self._report)

    def _report(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s task failed: %r", self._task_label(), task.exception())

    def _task_label(self) -> str:
        return "quorum queue" if self.kind == "queue" else "replicated stream"

    async def _cancel(self, tasks: Iterable[asyncio.Task[None]]) -> None:
        for task in list(tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
