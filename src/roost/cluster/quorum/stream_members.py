"""Membership of replicated streams (``rabbitmq-queues add_member / delete_member`` on a
stream), the streams' counterpart of ``regroup.py``: one watch of etcd's
``stream-group`` and ``stream-req`` keys on every node.

- ``stream-req/VHOST/NAME`` (a request, written by ``members.MemberControl``): applied
  here if this node leads the stream, by a fenced write of the group record.
- ``stream-group/VHOST/NAME``: a stand-in's members follow it; a member taken out drops
  its copy and its watch of the election (it no longer campaigns).

A new group is written only once it holds the leader's commit index, else the change
is refused after ``CHANGE_WAIT`` seconds (``stream_change.py``). A new member gets the
leader's ``SYNC`` and catches up through the usual incremental catch-up. A leader taken
out of its group refuses publishes, waits until a majority of the others hold its whole
log, writes the new group and resigns: the others' failover elects one of them; the old
leader's stream is replaced by a stand-in and its files go.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.coordinator import Delete, Put
from roost.cluster.quorum.members import RECONCILE, split_key
from roost.cluster.quorum.stream_change import hand_over, regroup

if TYPE_CHECKING:
    from roost.cluster.election import Election
    from roost.cluster.quorum.groupbase import Key
    from roost.cluster.quorum.stream_groups import StreamGroups
    from roost.cluster.quorum.stream_leader import StreamReplicator

log = logging.getLogger("roost.cluster.quorum")


class StreamMembers:
    def __init__(self, groups: StreamGroups) -> None:
        self.groups = groups
        self.left: set[Key] = set()  # streams this node was taken out of
        self.records: dict[Key, dict[str, Any]] = {}  # the newest group record seen
        self._busy: set[Key] = set()

    async def follow(self) -> None:
        coordinator = self.groups.node.coordinator
        prefix = self.groups.prefix + "/stream-"
        rows, revision = await coordinator.get_prefix(prefix)
        for kv in rows:
            self._seen(kv.key, kv.value)
        async for batch in coordinator.watch(prefix, revision + 1):
            for change in batch:
                self._seen(change.key, change.value)

    def _seen(self, raw_key: str, value: bytes | None) -> None:
        groups = self.groups
        split = split_key(groups.prefix, raw_key)
        if split is None:
            return
        kind, key = split
        if kind == "stream-req" and value is not None:
            groups.quorum._spawn_free(self.apply(key, json.loads(value)))
        if kind != "stream-group":
            return
        if value is None:
            self.records.pop(key, None)
            return
        self.records[key] = json.loads(value)
        members = list(self.records[key]["members"])
        group = groups.groups.get(key)
        if group is not None:
            group.members = members
        if groups.name in members:
            self.left.discard(key)
            return
        follower = groups.following.pop(key, None)
        if follower is not None:  # taken out of the group: the copy goes
            self.left.add(key)
            log.info("stream %s: no longer a member here, its copy goes", key)
            if follower._mark is not None:
                follower._mark.cancel()
            follower.log.destroy()
            task = groups.tasks.pop(key, None)
            if task is not None:
                task.cancel()

    def target(self, key: Key, arguments: dict[str, Any]) -> int:
        """The group's size to grow back to: ``x-initial-cluster-size`` (default 3),
        raised by ``add-member``, lowered by ``delete-member`` (kept in the record)."""
        record = self.records.get(key)
        if record is not None and record.get("target"):
            return int(record["target"])
        size = arguments.get("x-initial-cluster-size")
        return int(size) if size else 3

    # -- the leader applying a change

    async def apply(self, key: Key, request: dict[str, Any]) -> None:
        groups = self.groups
        rep = groups.leading.get(key)
        election = groups.elections.get(key)
        if rep is None or election is None or not rep.term or rep.deposed or key in self._busy:
            return  # not led here: the leader applies it
        node, op = request.get("node", ""), request.get("op")
        self._busy.add(key)
        try:
            members = list(rep.members)
            target = self.target(key, rep.queue.arguments)
            if op == "add" and node not in members:
                members.append(node)
                target = max(target, len(members))
                if await regroup(self, key, rep, election, members, target, request, adding=True):
                    rep.resync(node)  # its copy is made on this SYNC, then caught up
            elif op in ("delete", "move") and node in members and len(members) > 1:
                members.remove(node)
                if op == "delete":  # a move (``shrink``) keeps the size: it grows back
                    target = min(target, len(members))
                if node == groups.name:
                    await hand_over(self, key, rep, election, members, target, request)
                    return
                if await regroup(self, key, rep, election, members, target, request):
                    rep.acked.pop(node, None)  # nothing more is shipped to it
                    rep.sent.pop(node, None)
                    rep._commit()  # a smaller majority may commit more now
            else:  # done already (asked twice)
                await groups.node.coordinator.delete(groups._key("stream-req", key))
        finally:
            self._busy.discard(key)

    async def _write(
        self,
        key: Key,
        rep: StreamReplicator,
        election: Election,
        members: list[str],
        target: int,
        request: dict[str, Any],
    ) -> bool:
        groups = self.groups
        record = {"members": members, "leader": groups.name, "term": rep.term, "target": target}
        ops: list[Any] = [Put(groups._key("stream-group", key), json.dumps(record).encode())]
        if request.get("id"):  # asked (growing back asks nothing)
            ops.append(Delete(groups._key("stream-req", key)))
        result = await election.fenced_txn([], ops)
        if result.succeeded:
            self.records[key] = record
            log.info("stream %s: members now %s (target %d)", key, members, target)
        return bool(result.succeeded)

    # -- growing back

    async def reconcile(self) -> None:
        """Every ``RECONCILE`` seconds: streams led here with fewer members than their
        target take running nodes that are neither members nor drained, one at a time."""
        while True:
            await asyncio.sleep(RECONCILE)
            with contextlib.suppress(Exception):
                await self._reconcile_once()

    async def _reconcile_once(self) -> None:
        groups = self.groups
        running = groups._running()
        for key, rep in list(groups.leading.items()):
            if not rep.term or rep.deposed or rep.refusal or key not in groups.elections:
                continue
            if len(rep.members) >= self.target(key, rep.queue.arguments):
                continue
            drained = groups.quorum.regroup.drained  # ``shrink NODE``: no new members there
            spare = [n for n in running if n not in rep.members and n not in drained]
            if spare:
                log.info("stream %s: growing back onto %s", key, spare[0])
                await self.apply(key, {"op": "add", "node": spare[0]})
