"""Quorum queue leaders on a node cut off from etcd (the fence of ``cluster/lease.py``).

Once this node's lease has gone unrenewed for its TTL less a margin, the members may soon
see the leader's election key expire and elect another member, which hands out the same
messages again. So a fenced leader hands out nothing more, to any consumer of the queue
here (a peer node's subscription included), and confirms nothing (``Replicator.serving``;
it also reads the clock, so a process resumed after a pause stops before this listener
has run). It commits nothing once the members saw its key go: they refuse its term.

When the fence lifts:
- the lease was renewed in time (no one can have taken the election): what waited is
  confirmed and handed out;
- the lease ran out (this node registered again under a new one): its election key went
  with it, so the leader steps down as a leader without a majority does
  (``stepdown.py``): its uncommitted publishes are nacked, and it follows the member
  that won, or campaigns again if none did.
A leader the new leader's snapshot reached meanwhile was deposed then and follows already.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roost.cluster.quorum.manager import QuorumManager

log = logging.getLogger("roost.cluster.quorum")


class LeaderFence:
    def __init__(self, manager: QuorumManager) -> None:
        self.manager = manager

    def changed(self, fenced: bool) -> None:
        """``Membership.fence_listeners``: ``True`` fenced, ``False`` lifted."""
        manager = self.manager
        membership = manager.node.membership
        lease = membership.lease_id if membership is not None else 0
        for key, rep in list(manager.leading.items()):
            if rep.deposed:
                continue
            if fenced:
                log.warning("fenced: queue %s hands out and confirms nothing here", key)
                rep.fence(True)
                continue
            election = manager.elections.get(key)
            if election is not None and election.lease_id != lease:
                rep.fenced = False
                rep.step_down("this node's lease ran out while it was cut off from etcd")
            else:
                log.info("queue %s: lease renewed in time, led here again", key)
                rep.fence(False)
