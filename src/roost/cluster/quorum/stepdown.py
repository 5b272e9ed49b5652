"""A quorum queue's leader without a majority steps down.

A leader that hears from no majority of its members for two lease TTLs while a
majority of the others are running (``role.py``; cut off from them over the links but
not from etcd, so its lease stays; members that are down elect no one, so then it stays
and holds its publishes) drops its
uncommitted tail and refuses publishes (``Replicator.step_down``); here its election is
resigned, which starts the failover (``manager.py``) among the members that still reach
each other: the one with the longest log wins. Nothing can be confirmed by two leaders:
the old one commits nothing without a majority's acks, and the members refuse its term
once they saw its election key go.

It keeps its committed copy. If no one else takes the election (the members restarted
holding no copy, so none of them campaigns) and a majority of its members' links are up
again, it campaigns again with that copy. If another member wins, its home moves, the
old leader's queue becomes a stand-in and, once linked, it gets the new leader's
snapshot as a member.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from roost.cluster.errors import ClusterError
from roost.cluster.quorum.groupbase import POSITIONS_WAIT, Key
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.role import STEPDOWN_TTLS

if TYPE_CHECKING:
    from roost.cluster.quorum.manager import QuorumManager

log = logging.getLogger("roost.cluster.quorum")

RETRY = 1.0  # seconds between a stepped-down leader's looks at its links and election


class StepDown:
    def __init__(self, manager: QuorumManager, fallback: float) -> None:
        self.manager = manager
        self.fallback = fallback  # the longest the members take to elect one of them

    def after(self) -> float:
        """Seconds without a majority before a leader resigns: two lease TTLs."""
        m = self.manager.node.membership
        return float(STEPDOWN_TTLS * m.ttl) if m is not None else 0.0

    def arm(self, key: Key, rep: Replicator) -> None:
        """Before ``rep.started``: its election is won."""
        rep.stepdown_after = self.after()
        m = self.manager.node.membership
        if m is not None:  # fenced by the clock too (fence.py)
            rep.in_lease = m.in_lease
        rep.running = self.manager._running
        rep.on_lost_majority = lambda: self.manager._spawn(key, self._resign(key, rep))

    async def _resign(self, key: Key, rep: Replicator) -> None:
        """``rep`` heard from no majority and refuses publishes: its election goes (the
        members campaign), then it waits to lead again only if no one else does."""
        manager = self.manager
        if manager.leading.get(key) is rep:
            del manager.leading[key]
        election = manager.elections.pop(key, None)
        if election is not None:
            try:
                await election.resign()
            except ClusterError as exc:  # etcd out of reach too: the lease will expire
                log.warning("queue %s: could not resign (%s)", key, exc)
        await self._lead_again(key, rep)

    async def _lead_again(self, key: Key, old: Replicator) -> None:
        """Campaigns again with the committed copy once a majority of the members'
        links are up and the election stayed vacant longer than the members take to
        elect one of them. Over when the queue here is replaced (a new leader's home)
        or deleted, or another role for it starts here."""
        manager = self.manager
        queue = old.queue
        loop = asyncio.get_running_loop()
        election = manager._election(key)
        patience = self.fallback + POSITIONS_WAIT + self.after()
        vacant_since: float | None = None
        while True:
            await asyncio.sleep(RETRY)
            vhost = manager.broker.catalog.vhosts.get(key[0])
            if vhost is None or vhost.queues.get(key[1]) is not queue:
                return
            if key in manager.leading or key in manager.following:
                return
            linked = sum(1 for m in old.followers if manager.node.links.link(m) is not None)
            try:
                vacant = linked + 1 >= old.majority and await election.leader() is None
            except ClusterError:
                vacant = False
            now = loop.time()
            if not vacant:
                vacant_since = None
            elif vacant_since is None:
                vacant_since = now
            elif now - vacant_since >= patience:
                break
        rep = Replicator(manager.broker, manager.node.links, queue, manager.name, old.members)
        rep.live = dict(old.live)  # committed only: step_down dropped the rest
        queue.replication = rep
        queue.group = rep
        manager.leading[key] = rep
        log.warning("queue %s: no leader since stepping down; campaigning again", key)
        await manager._elect(key, rep, write_home=True)
