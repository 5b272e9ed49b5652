"""One owner per key among the running nodes, through an etcd election: the node that
holds ``owners/KEY`` (created under its lease, ``cluster/election.py``) runs what the
key names (a dynamic shovel: ``shovel/VHOST/NAME``), and no other node does.

Picking the runner by hashing over the running nodes left a window at every join or
leave: each node moved a shovel when *it* saw the change, so for a moment two nodes ran
it, or none. With the election a node starts the shovel only once it holds the key, and
the key goes only with its holder's lease (a graceful stop revokes it, ``kill -9`` lets
it expire) or by its resigning, after which the others campaign again. A node whose
lease is lost sees its key deleted and stops the shovel; another holds the key by then
only if it campaigned after the deletion. So two nodes never hold the key at once.

A node cut off from etcd cannot see the deletion: it fences itself instead. Once its
lease has gone unrenewed for the TTL less a margin (``lease.py``), before etcd can
expire it and another node can win the key, it stops every key it holds (``changed
(False)``) and ``owns`` answers False from then on (the clock is read at each call, so a
shovel checks it before moving each message, even right after a blocked event loop). A
renewal in time gives the keys back (they are still under its lease); a lost lease
means campaigning again under the new one, after whoever took them meanwhile.

The node that rendezvous hashing prefers (``ClusterNode.runs_here``) campaigns at once,
the others after ``GRACE``, so the keys spread over the nodes as before; a key is not
taken back when its preferred node joins later (no hand-over without need).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from roost.cluster.election import Election, Leader
from roost.cluster.errors import ClusterError

if TYPE_CHECKING:
    from roost.cluster.node import ClusterNode

log = logging.getLogger("roost.cluster.owners")

GRACE = 1.0  # seconds a node that is not the key's preferred one waits before campaigning
RETRY = 0.5  # after etcd could not be reached, or while this node has no lease

Changed = Callable[[bool], None]  # True: this node now runs it; False: it must stop


class Owners:
    def __init__(self, node: ClusterNode) -> None:
        self.node = node
        self._claims: dict[str, asyncio.Task[None]] = {}
        self._held: dict[str, Election] = {}
        self._wanted: dict[str, Changed] = {}  # every key claimed, fenced or not
        self._fenced = False

    def owns(self, key: str) -> bool:
        """Does this node run ``key`` now: it holds the key and is not fenced."""
        if key not in self._held:
            return False
        membership = self.node.membership
        return membership is not None and membership.in_lease()

    def claim(self, key: str, changed: Changed) -> None:
        """Campaign for ``key`` until released; ``changed`` says when this node wins or
        loses it. A key already claimed keeps its campaign."""
        self._wanted[key] = changed
        if key not in self._claims and not self._fenced:
            task = asyncio.get_running_loop().create_task(self._campaign(key, changed))
            self._claims[key] = task

    def fence(self, fenced: bool) -> None:
        """``Membership``'s fence: stop every key at once (``True``), or campaign again
        (``False``: the lease was renewed in time, or the node registered again)."""
        self._fenced = fenced
        if not fenced:
            for key, changed in list(self._wanted.items()):
                self.claim(key, changed)
            return
        for key in list(self._claims):
            election = self._held.pop(key, None)
            self._claims.pop(key).cancel()  # its watch may hang on the unreachable etcd
            if election is not None:
                log.warning("fenced: this node stops running %s (term %d)", key, election.term)
                self._wanted[key](False)

    async def release(self, key: str) -> None:
        """Stop campaigning; resign the key if held, so another node takes it at once."""
        self._wanted.pop(key, None)
        election = self._held.pop(key, None)  # first: the campaign's end says nothing
        task = self._claims.pop(key, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if election is not None:
            with contextlib.suppress(ClusterError):
                await election.resign()

    async def stop(self) -> None:
        for key in list(self._wanted):
            await self.release(key)

    def _key(self, key: str) -> str:
        return f"{self.node.prefix}/owners/{quote(key, safe='')}"

    async def _campaign(self, key: str, changed: Changed) -> None:
        while True:
            membership = self.node.membership
            lease = 0 if membership is None else membership.lease_id
            if not lease:  # registering again: a key without a lease would never go
                await asyncio.sleep(RETRY)
                continue
            if not self.node.runs_here(key):  # let the preferred node take it first
                await asyncio.sleep(GRACE)
            election = Election(self.node.coordinator, self._key(key), self.node.name, lease)
            try:
                leader = await election.campaign_once()
                if not election.term:
                    await election._wait_for_vacancy(leader)
                    continue
                self._held[key] = election
                log.info("this node runs %s (term %d)", key, election.term)
                changed(True)
                try:  # until the key goes: this node's lease ended, or it resigned
                    await election._wait_for_vacancy(Leader(self.node.name, election.term))
                finally:
                    if self._held.get(key) is election:
                        del self._held[key]
                        log.info("this node no longer runs %s", key)
                        changed(False)
            except ClusterError as exc:
                log.debug("campaign for %s: %s", key, exc)
                await asyncio.sleep(RETRY)
