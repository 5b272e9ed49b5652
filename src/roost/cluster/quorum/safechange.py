"""When a quorum queue's leader may write a new group record (a member added or taken
out, a leader handing over), sans-IO but for the wait.

Every confirmed record is held by a majority of the group named in etcd, and the
members elect from that record (``candidacy.py``). A new record takes effect at once, so
before it is written a majority *of the new group* must hold the leader's commit index
(Raft's rule for a membership change: the new configuration holds every committed entry
before the old one's members can leave). Without it: n2 taken out of {n1, n2, n3} while
n3 lags records n1 and n2 committed, a node added straight away, n1 killed before n3
catches up; n3 and the empty newcomer are a majority of the new group and elect n3,
which lacks what was confirmed. A member being added counts as holding nothing (it is
sent its snapshot only once the record names it).

From the moment the wait ends until the record is written, a record commits only when
a majority of both groups holds it (``Replicator.joining``): one confirmed in between
is held by the new group too. A change whose new group does not catch up within
``CHANGE_WAIT`` is not made; the request is answered with an error (as
``rabbitmq-queues`` reports a timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roost.cluster.quorum.leader import Replicator

CHANGE_WAIT = 10.0  # seconds a change waits for its new group (the asker waits 15)
POLL = 0.05  # seconds between looks at the members' acks


def held_by(rep: Replicator, members: Collection[str]) -> int:
    """The log index a majority of ``members`` holds on disk, as the leader knows it:
    its own durable index, each follower's last ack, 0 for a node not yet a member."""
    held = sorted(
        (rep.own_durable if m == rep.node else rep.acked.get(m, 0) for m in members),
        reverse=True,
    )
    return held[len(held) // 2] if held else 0


def may_regroup(rep: Replicator, members: Collection[str], upto: int = 0) -> bool:
    """May ``rep`` write a record naming ``members``: a majority of them holds its
    commit index (and ``upto``, a hand-over's whole log as it stopped taking publishes)."""
    return held_by(rep, members) >= max(rep.commit_index, upto)


async def until_held(rep: Replicator, members: Collection[str], upto: int = 0) -> bool:
    """Waits (at most ``CHANGE_WAIT`` seconds) until ``may_regroup``; False if it never
    came or ``rep`` stopped leading."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CHANGE_WAIT
    while not rep.deposed:
        if may_regroup(rep, members, upto):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL)
    return False
