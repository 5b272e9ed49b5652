"""The leader's half of membership changes (``members.py`` is the asking half), and
every node's view of the groups: one watch of etcd's ``quorum`` keys.

- ``quorum/VHOST/QUEUE`` (a group record): this node's management view follows it; a
  member taken out drops its copy and ignores records still in flight to it.
- ``quorum-req/VHOST/QUEUE`` (a request): applied here if this node leads the queue.
- ``quorum-drain/NODE``: NODE is drained (``shrink``); growing back skips it.

Every new group is written only once a majority of it holds the leader's commit index
(``safechange.py``); else the change is refused after ``CHANGE_WAIT`` seconds. A leader
taken out of its own group hands over: it takes no more publishes, waits until a
majority of the remaining members hold its whole log, writes the new group and
resigns; the failover path (``manager._watch_leader``) elects one of the others, with
no lease to wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.coordinator import Delete, Put
from roost.cluster.quorum import safechange
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.members import RECONCILE, Key, answer_refused, split_key, target_of
from roost.core.queues.quorum import QuorumQueue

if TYPE_CHECKING:
    from roost.cluster.election import Election
    from roost.cluster.quorum.manager import QuorumManager

log = logging.getLogger("roost.cluster.quorum")


class Regroup:
    def __init__(self, manager: QuorumManager) -> None:
        self.manager = manager
        self.records: dict[Key, dict[str, Any]] = {}  # the newest group record seen
        self.drained: set[str] = set()
        self._busy: set[Key] = set()  # a change is being applied
        self.left: set[Key] = set()  # groups this node was taken out of
        # groups that listed this node when it started (None: not read yet); it dropped
        # its copies then, which may hold records confirmed with its acks
        self.at_start: set[Key] | None = None

    @property
    def prefix(self) -> str:
        return self.manager.prefix + "/quorum"

    def excluded(self, key: Key) -> bool:
        """This node was taken out of the queue's group (records still in flight to it
        are stale). A node just added may get the leader's snapshot before it sees the
        new group: that one is taken."""
        return key in self.left

    def forgot(self, key: Key, marked: int) -> bool:
        """This member may lack records confirmed with its acks: it was in the group
        when its node started and has not yet taken a whole snapshot (``marked``: the
        term of its newest). A copy kept with its member record (``store/member_log``)
        comes back with its ``marked``; one without a usable record does not come back
        at all, so this is "no member record recovered". Its position, even
        empty, must not count: with it, a shorter member could win and the others drop
        what it lacks."""
        return not marked and (self.at_start is None or key in self.at_start)

    def target(self, key: Key, arguments: dict[str, Any]) -> int:
        return target_of(self.records.get(key), arguments)

    # -- following etcd

    async def follow(self) -> None:
        coordinator = self.manager.node.coordinator
        rows, revision = await coordinator.get_prefix(self.prefix)
        self.read_at_start([(kv.key, kv.value) for kv in rows])
        async for batch in coordinator.watch(self.prefix, revision + 1):
            for change in batch:
                self._seen(change.key, change.value)

    def read_at_start(self, rows: list[tuple[str, bytes]]) -> None:
        """The keys as this node found them when it started."""
        for raw_key, value in rows:
            self._seen(raw_key, value, live=False)
        name = self.manager.name
        self.at_start = {key for key, rec in self.records.items() if name in rec["members"]}

    def _seen(self, raw_key: str, value: bytes | None, *, live: bool = True) -> None:
        """``live``: written while this node ran (not read at its start), so a record
        that adds this node names a member with nothing to forget."""
        manager = self.manager
        if raw_key.startswith(self.prefix + "-drain/"):
            name = raw_key.rsplit("/", 1)[-1]
            (self.drained.add if value is not None else self.drained.discard)(name)
            return
        split = split_key(manager.prefix, raw_key)
        if split is None:
            return
        kind, key = split
        if kind == "quorum-req" and value is not None:
            manager._spawn_free(self.apply(key, json.loads(value)))
        if kind != "quorum":
            return
        if value is None:
            self.records.pop(key, None)
            self.left.discard(key)
            return
        before = self.records.get(key)
        record = self.records[key] = json.loads(value)
        mine = manager.name in record["members"]
        joined = mine and (
            key in self.left or (live and (before is None or manager.name not in before["members"]))
        )
        if mine:
            self.left.discard(key)
        elif before is not None and manager.name in before["members"]:
            self.left.add(key)
        group = manager.groups.get(key)
        if group is not None:
            group.members = list(record["members"])
            group.in_sync = record.get("online")
        if manager.name not in record["members"]:
            follower = manager.following.pop(key, None)
            if follower is not None:  # taken out of the group: our copy goes
                log.info("queue %s: no longer a member here", key)
                follower.store.destroy()
                task = manager.tasks.pop(key, None)
                if task is not None:
                    task.cancel()
        elif joined:
            self._follow_added(key)

    def _follow_added(self, key: Key) -> None:
        """Just added to the group of a queue shown here as a stand-in: follows at once,
        empty, so it writes its position if the leader dies before its snapshot arrives
        (a frame that came before this record was dropped as stale); else the others
        could never hear from a majority (``candidacy.py``). It acked nothing in this
        group: empty is its true position, never ahead of a member holding records."""
        manager = self.manager
        if self.at_start is not None:
            self.at_start.discard(key)
        vhost = manager.broker.catalog.vhosts.get(key[0])
        here = None if vhost is None else vhost.queues.get(key[1])
        if key in manager.following or key in manager.leading or here is None or not here.remote:
            return
        log.info("queue %s: added here, following before the leader's first batch", key)
        manager.follow(key)

    # -- the leader applying a change

    async def apply(self, key: Key, request: dict[str, Any]) -> None:
        manager = self.manager
        rep = manager.leading.get(key)
        if key in self._busy or "error" in request:  # an answer (``_refuse``), not a request
            return
        node, op = request.get("node", ""), request.get("op")
        self._busy.add(key)
        try:
            if rep is None:
                queue = self._local_single(key)
                if queue is not None and op == "add":
                    self.upgrade(key, queue, [manager.name, node], request)
                return
            election = manager.elections.get(key)
            if election is None or not rep.term or rep.deposed:
                return
            members = list(rep.members)
            target = self.target(key, rep.queue.arguments)
            if op == "add" and node not in members:
                members.append(node)
                target = max(target, len(members))
                if await self._regroup(key, rep, election, members, target, request, adding=True):
                    rep.resync(node)
            elif op in ("delete", "move") and node in members and len(members) > 1:
                members.remove(node)
                target = min(target, len(members)) if op == "delete" else target
                if node == manager.name:
                    await self._hand_over(key, rep, election, members, target, request)
                    return
                if await self._regroup(key, rep, election, members, target, request):
                    rep.acked.pop(node, None)  # nothing more is shipped to it
                    rep.need_snapshot.discard(node)
                    rep._commit()  # a smaller majority may commit more now
            else:  # done already (asked twice)
                await manager.node.coordinator.delete(manager._key("quorum-req", key))
        finally:
            self._busy.discard(key)

    async def _regroup(
        self, key: Key, rep: Replicator, election: Election, members: list[str], target: int,
        request: dict[str, Any] | None, upto: int = 0, *, adding: bool = False,
    ) -> bool:  # fmt: skip
        """Writes the group ``members`` once a majority of them holds the commit index
        (``safechange.py``); until then the old group stays. True when written."""
        return await safechange.write_when_held(
            rep, members,
            lambda: self._write(key, rep, election, members, target, request),
            lambda: self._refuse(key, rep, members, request),
            upto, adding=adding,
        )  # fmt: skip

    async def _refuse(
        self, key: Key, rep: Replicator, members: list[str], request: dict[str, Any] | None
    ) -> None:
        """The new group did not catch up in time: the asker is told."""
        why = safechange.refusal(rep, key[1], members)
        log.warning("queue %s: %s", key, why)
        if not rep.deposed:
            req_key = self.manager._key("quorum-req", key)
            await answer_refused(self.manager.node.coordinator, req_key, request, why)

    async def _write(
        self, key: Key, rep: Replicator, election: Election, members: list[str], target: int,
        request: dict[str, Any] | None,
    ) -> bool:  # fmt: skip
        manager = self.manager
        record = {
            "members": members,
            "leader": manager.name,
            "term": rep.term,
            "target": target,
            "online": [m for m in rep.online() if m in members],
        }
        ops: list[Any] = [Put(manager._key("quorum", key), json.dumps(record).encode())]
        if request is not None:
            ops.append(Delete(manager._key("quorum-req", key)))
        before = self.records.get(key, {}).get("members")
        result = await election.fenced_txn([], ops)
        if result.succeeded:
            self.records[key] = record
            if before != members:
                log.info("queue %s: members now %s (target %d)", key, members, target)
        return result.succeeded

    async def _hand_over(
        self, key: Key, rep: Replicator, election: Election, members: list[str], target: int,
        request: dict[str, Any],
    ) -> None:  # fmt: skip
        """Taken out of its own group: publishes are refused, and the new group is
        written once a majority of the remaining members holds this leader's whole log
        (so the one they elect is caught up); then it resigns."""
        manager = self.manager
        rep.refusing = True  # publishes are refused (nacked): the client republishes
        if not await self._regroup(key, rep, election, members, target, request, rep.index):
            rep.refusing = False
            return
        manager.leading.pop(key, None)
        manager.elections.pop(key, None)
        rep.close("leadership handed over")
        await election.resign()
        log.warning("queue %s: left its group, leadership handed to %s", key, members)

    # -- a one-member queue growing

    def _local_single(self, key: Key) -> QuorumQueue | None:
        vhost = self.manager.broker.catalog.vhosts.get(key[0])
        queue = None if vhost is None else vhost.queues.get(key[1])
        if isinstance(queue, QuorumQueue) and not queue.remote and queue.replication is None:
            return queue
        return None

    def upgrade(
        self, key: Key, queue: QuorumQueue, members: list[str], request: dict[str, Any] | None
    ) -> None:
        """A one-member queue led here becomes replicated: every message it holds (ready
        and handed out to this node's consumers) goes to the new member's snapshot."""
        manager = self.manager
        rep = Replicator(manager.broker, manager.node.links, queue, manager.name, members)
        for entry in queue.ready:
            rep.live[entry.seq] = entry
        for consumer in queue.consumers:
            for q, entry, _c in consumer.session._unacked.values():
                if q is queue:
                    rep.live[entry.seq] = entry
        rep.live = dict(sorted(rep.live.items()))
        queue.replication = rep
        queue.group = rep
        manager.leading[key] = rep
        target = max(self.target(key, queue.arguments), len(members))
        self.records[key] = {"members": members, "target": target}
        manager._spawn(key, self._elect_then_clear(key, rep, request))

    async def _elect_then_clear(
        self, key: Key, rep: Replicator, request: dict[str, Any] | None
    ) -> None:
        await self.manager._elect(key, rep, write_home=False)
        if request is not None:
            await self.manager.node.coordinator.delete(self.manager._key("quorum-req", key))

    # -- growing back

    async def reconcile(self) -> None:
        """Every ``RECONCILE`` seconds: groups led here smaller than their target take
        running nodes that are not drained, one at a time."""
        while True:
            await asyncio.sleep(RECONCILE)
            with contextlib.suppress(Exception):
                await self._reconcile_once()

    async def _reconcile_once(self) -> None:
        manager = self.manager
        running = manager._running()
        for key, rep in list(manager.leading.items()):
            if not rep.term or rep.deposed or rep.refusing or key in self._busy:
                continue
            record = self.records.get(key) or {}
            election = manager.elections.get(key)
            if election is not None and record.get("online") != rep.online():
                # the others' management view: who is in sync, as this leader sees it
                target = self.target(key, rep.queue.arguments)
                await self._write(key, rep, election, list(rep.members), target, None)
            if len(rep.members) >= self.target(key, rep.queue.arguments):
                continue
            spare = [n for n in running if n not in rep.members and n not in self.drained]
            if spare:
                log.info("queue %s: growing back onto %s", key, spare[0])
                await self.apply(key, {"op": "add", "node": spare[0]})
        for vhost in list(manager.broker.catalog.vhosts.values()):
            for queue in list(vhost.queues.values()):
                key = (vhost.name, queue.name)
                if not isinstance(queue, QuorumQueue) or queue.remote or key in manager.leading:
                    continue
                if queue.replication is not None or self.target(key, queue.arguments) < 2:
                    continue
                spare = [n for n in running if n != manager.name and n not in self.drained]
                if spare:
                    log.info("queue %s: growing onto %s", key, spare[0])
                    self.upgrade(key, queue, [manager.name, spare[0]], None)
