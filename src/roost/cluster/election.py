"""Leader election through etcd, with the election's revision as a fencing term.

One key per election (``leaders/VHOST/QUEUE`` for a replicated queue): a candidate
creates it under its node's lease only if it does not exist. The key's create revision
is the winner's **term**: etcd's revisions only grow, so a later leader always has a
larger term than any before it. When the leader's lease expires (or it resigns) the key
is deleted and the candidates that watch it try again.

Fencing: whatever a leader writes to etcd on the election's behalf goes through
``fenced_txn``, which adds "the election key still has my create revision" to the
transaction's compares, so a deposed leader (paused, cut off, its lease gone) can write
nothing. Writes that do not go through etcd (replication entries on the links) carry the
term, and followers refuse any term older than the newest they have seen.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from roost.cluster.coordinator import Compare, Coordinator, Delete, Get, Op, Put, TxnResult


@dataclass(frozen=True)
class Leader:
    node: str
    term: int  # the election key's create revision


class Election:
    def __init__(self, coordinator: Coordinator, key: str, node: str, lease_id: int) -> None:
        self.coordinator = coordinator
        self.key = key
        self.node = node
        self.lease_id = lease_id
        self.term = 0  # ours while we lead, else 0

    async def campaign_once(self) -> Leader:
        """Try to become leader now; returns whoever leads afterwards (us or another)."""
        value = json.dumps({"node": self.node}).encode()
        while True:
            result = await self.coordinator.txn(
                [Compare(self.key, "create", 0)],
                [Put(self.key, value, lease=self.lease_id), Get(self.key)],
                [Get(self.key)],
            )
            rows = result.reads[0] if result.reads else []
            if rows:  # else the key went between the compare and the read: again
                break
        kv = rows[0]
        leader = Leader(json.loads(kv.value)["node"], kv.create_revision)
        # ours when just created, or created earlier under this same lease
        self.term = leader.term if kv.lease == self.lease_id else 0
        return leader

    async def campaign(self) -> int:
        """Wait until this node leads; returns its term."""
        while True:
            leader = await self.campaign_once()
            if self.term:
                return self.term
            await self._wait_for_vacancy(leader)

    async def _wait_for_vacancy(self, leader: Leader) -> None:
        rows, revision = await self.coordinator.get_prefix(self.key)
        if not any(kv.key == self.key and kv.create_revision == leader.term for kv in rows):
            return
        async for batch in self.coordinator.watch(self.key, revision + 1):
            if any(change.key == self.key and change.value is None for change in batch):
                return

    async def leader(self) -> Leader | None:
        kv = await self.coordinator.get(self.key)
        if kv is None:
            return None
        return Leader(json.loads(kv.value)["node"], kv.create_revision)

    async def fenced_txn(
        self, compare: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        """A transaction that commits only while this node still leads with its term."""
        if not self.term:
            return TxnResult(False, 0)
        fence = Compare(self.key, "create", self.term)
        return await self.coordinator.txn([fence, *compare], success, failure)

    async def resign(self) -> None:
        if self.term:
            await self.fenced_txn([], [Delete(self.key)])
            self.term = 0
