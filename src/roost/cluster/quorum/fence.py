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

etcd out of reach for every node (killed, or partitioned from all of them): every node
is fenced, so no member can see the leader's key go or campaign; the leader goes on
serving while a majority of its members (itself counted) say they are fenced too (each
node tells its peers over the links, ``Fenced``; a member whose link is down counts as
not fenced). A member that can renew again says so before it can campaign: its watch of
the election and the positions it must write come after its lease is back.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

from roost.cluster.link import frames as f

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.cluster.node import ClusterNode
    from roost.cluster.quorum.leader import Replicator
    from roost.cluster.quorum.manager import QuorumManager

log = logging.getLogger("roost.cluster.quorum")


class LeaderFence:
    """Registers itself: ``Membership.fence_listeners`` and the links' frames."""

    def __init__(self, node: ClusterNode, manager: QuorumManager) -> None:
        self.node = node
        self.manager = manager
        self.fenced = False
        self.peers_fenced: set[str] = set()
        if node.membership is not None:
            node.membership.fence_listeners.append(self.changed)
        node.frame_handlers.append(self.frame)
        node.link_up.append(self._link_up)
        node.link_down.append(lambda link, _why: self._peer(link.peer, False))

    def changed(self, fenced: bool) -> None:
        """``Membership.fence_listeners``: ``True`` fenced, ``False`` lifted."""
        self.fenced = fenced
        links = self.node.links
        for peer in list(links.links):
            link = links.link(peer)
            if link is not None:
                link.send(f.Fenced(fenced))
        manager = self.manager
        membership = self.node.membership
        lease = membership.lease_id if membership is not None else 0
        led = [(key, rep) for key, rep in manager.leading.items() if not rep.deposed]
        if led:  # one line, not one per queue
            names = ", ".join(f"'{key[1]}'" for key, _rep in led[:5])
            more = f" and {len(led) - 5} more" if len(led) > 5 else ""
            if fenced:
                log.warning("fenced: of its quorum queues (%s%s), this node hands out and "
                            "confirms nothing here", names, more)  # fmt: skip
            else:
                log.info("fence lifted for quorum queue(s) %s%s", names, more)
        for key, rep in led:
            if fenced:
                rep.fenced_together = partial(self.together, rep)
                rep.fence(True)
                continue
            election = manager.elections.get(key)
            if election is not None and election.lease_id != lease:
                rep.fenced = False
                rep.step_down("this node's lease ran out while it was cut off from etcd")
            else:
                rep.fence(False)  # renewed in time: led here again

    def together(self, rep: Replicator) -> bool:
        """A majority of ``rep``'s members (this one counted) cannot reach etcd either."""
        links = self.node.links
        fenced = [m for m in rep.followers if m in self.peers_fenced and links.link(m)]
        return 1 + len(fenced) >= rep.majority

    def frame(self, link: Link, frame: f.Frame) -> None:
        if isinstance(frame, f.Fenced):
            self._peer(link.peer, frame.fenced)

    def _peer(self, peer: str, fenced: bool) -> None:
        if fenced:
            self.peers_fenced.add(peer)
        else:
            self.peers_fenced.discard(peer)
        if fenced and self.fenced:  # one more member cut off with this one
            for rep in list(self.manager.leading.values()):
                if not rep.deposed:
                    rep.wake()

    def _link_up(self, link: Link) -> None:
        if self.fenced:
            link.send(f.Fenced(True))
