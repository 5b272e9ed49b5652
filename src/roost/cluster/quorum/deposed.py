"""A leader deposed by a newer term's first batch (or stepped down), and the directory
of its queue.

It becomes a member of the new term at once (``manager.follow``), with a fresh copy in
the directory its queue used (``store/member_log.py``: the copy is found there again
after a restart), while the queue itself stays here until the definitions' watch
replaces it with a stand-in for the new leader. One live store per directory: the
queue's store is destroyed before the member's opens (its messages are the old term's,
which the new leader's snapshot replaces; a destroyed store never touches its directory
again), and that replacement, which deletes the queue, leaves the member copy alone.
Once the member has acknowledged the new term's records, that copy is what the node
holds of what they committed: removed with the queue, a node counted as holding them
would have lost them, and its member record with them (``rejoining.adopt_copies``).
Killed before that replacement, it finds the copy again at its restart, the queue its
definitions recreate there holding none of it (``store/member_copies.py``). Until the
new leader's snapshot is durable here, the member votes for the log it led (``release``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from roost.cluster.link import frames as f
from roost.cluster.quorum.candidacy import Position
from roost.cluster.quorum.leader import Replicator
from roost.core.queues.quorum import QuorumQueue

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.cluster.quorum.standin import QuorumStandIn
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

log = logging.getLogger("roost.cluster.quorum")


def fenced_off(rep: Replicator, link: Link, frame: f.Replicate) -> bool:
    """A batch of a term no newer than the one ``rep`` won (elected, its group record
    still being written, ``started`` not yet run) is an older leader's: refused, and
    that leader told of the newer term. Taken for a newer leader's, it deposed a member
    being promoted (its promotion cancelled, its election key held: no leader), and
    would now destroy the copy it promotes."""
    won = max(rep.term, rep.elected)
    if frame.term > won:
        return False
    link.send(f.ReplicateAck(frame.vhost, frame.queue, won, 0, False))
    return True


def stand_down(rep: Replicator) -> None:
    """``rep`` heard from a newer leader: it closes; the member copy follows."""
    rep.close("a newer leader was elected")
    log.warning("queue '%s': deposed, a member of the newer leader's term", rep.queue.name)


def release(vhost: VHost | None, name: str) -> Position | None:
    """Before a member copy opens in the directory of queue ``name``: a queue this node
    led there (deposed, or stepped down, until its stand-in replaces it) gives its store
    up, destroyed now; a second store on the directory wrote over the member's files,
    and was destroyed with the queue after the member had acknowledged records.

    Returned: the position of the log it led, (its term, the last index it wrote: what
    it counted itself as holding, ``held_here``), for the member to vote with as a bound
    (``Follower.bound``) until the new leader's snapshot is durable: its copy is empty
    meanwhile, and with an empty position (or none) counted, a member lacking records
    committed in that term with this node's acks could win once the new leader is lost
    too. None when it led no term (a restarted leader that lost its election)."""
    queue = None if vhost is None else vhost.queues.get(name)
    if not isinstance(queue, QuorumQueue) or queue.remote:
        return None
    if queue.store is not None:
        queue.store.destroy()  # the queue (not serving: deposed) reads nothing more
    rep = queue.replication
    return (rep.term, rep.held_here) if isinstance(rep, Replicator) and rep.term else None


def name_successor(led: Queue | None, stand_in: QuorumStandIn) -> None:
    """``stand_in`` (for the new leader) is about to replace ``led``, the queue this node
    led: the acks of what it delivered count there from now on (``Replicator.forgotten``),
    and its member copy stays (``replaced_by_stand_in``)."""
    if isinstance(led, QuorumQueue) and isinstance(led.replication, Replicator):
        led.replication.successor = stand_in


def replaced_by_stand_in(queue: Queue) -> bool:
    """``queue`` is the one this node led, being replaced by its stand-in for the new
    leader (``name_successor``), not deleted: the member copy kept here stays."""
    rep = getattr(queue, "replication", None)
    return isinstance(rep, Replicator) and rep.successor is not None
