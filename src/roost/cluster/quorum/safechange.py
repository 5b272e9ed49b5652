"""When a quorum queue's or a replicated stream's leader may write a new group record (a
member added or taken out, a leader handing over), sans-IO but for the wait. Both
leaders (``leader.Replicator``, ``stream_leader.StreamReplicator``) answer ``Changing``:
a stream's log index is its offset.

Every confirmed record is held by a majority of the group named in etcd, and the
members elect from that record (``candidacy.py``). A new record takes effect at once, so
before it is written a majority *of the new group* must hold the leader's commit index
(Raft's rule for a membership change: the new configuration holds every committed entry
before the old one's members can leave). A member being added counts as holding
nothing; for an addition it is enough that every majority of the new group meets a
holder (``may_regroup``). Without the rule: n2 taken out of {n1, n2, n3} while n3 lags
records n1 and n2 committed, a node added straight away, n1 killed before n3 catches
up; n3 and the empty newcomer are a majority of the new group and elect n3, which
lacks what was confirmed.

From the moment the wait ends until the record is written, a record commits only when
a majority of the old group holds it and every majority of the new one meets a holder
(``Replicator.joining``): one confirmed in between is safe in the new group too. A
change whose new group does not catch up within ``CHANGE_WAIT`` is not made; the
request is answered with an error (as ``rabbitmq-queues`` reports a timeout).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import Protocol

CHANGE_WAIT = 10.0  # seconds a change waits for its new group (the asker waits 15)
POLL = 0.05  # seconds between looks at the members' acks


class Changing(Protocol):
    """A leader whose group may change."""

    node: str
    acked: dict[str, int]  # follower -> the log index it holds on disk
    deposed: bool
    # the end of the log it was elected with: what the old term committed is held by a
    # member once it holds this (its commit index may start below)
    term_start: int

    @property
    def held_here(self) -> int:
        """The log index this leader counts as holding itself."""
        ...

    @property
    def committed(self) -> int:
        """Its commit index."""
        ...


def held_by(rep: Changing, members: Collection[str], holders: int) -> int:
    """The log index at least ``holders`` of ``members`` hold, as the leader knows it:
    each follower's last ack (on disk), 0 for a node not yet a member, and for the leader
    ``held_here``."""
    held = sorted(
        (rep.held_here if m == rep.node else rep.acked.get(m, 0) for m in members),
        reverse=True,
    )
    return held[holders - 1] if 0 < holders <= len(held) else 0


def in_every_majority(members: Collection[str]) -> int:
    """How many holders every majority of ``members`` meets: an election among them
    (a majority's positions, ``candidacy.py``) then picks a member holding it."""
    return (len(members) + 1) // 2


def needed(rep: Changing, upto: int = 0) -> int:
    """The log index a new group must hold: the commit index (and ``upto``)."""
    # a promoted leader's commit index starts low, yet the old term committed what it
    # inherited: that is held once its term's first record (or SYNC) is
    return max(rep.committed, rep.term_start, upto)


def may_regroup(
    rep: Changing, members: Collection[str], upto: int = 0, *, adding: bool = False
) -> bool:
    """May ``rep`` write a record naming ``members``: a majority of them holds its commit
    index (and ``upto``, a hand-over's whole log as it stopped taking publishes).
    ``adding``: the new group is the old one and a node that holds nothing yet (it is
    sent its snapshot once named); enough that every majority of it meets a holder, so a
    one-member queue can grow to two (its newcomer is not needed to hold anything yet).
    The next change asks for a majority again."""
    holders = in_every_majority(members) if adding else len(members) // 2 + 1
    return held_by(rep, members, holders) >= needed(rep, upto)


async def until_held(
    rep: Changing, members: Collection[str], upto: int = 0, *, adding: bool = False
) -> bool:
    """Waits (at most ``CHANGE_WAIT`` seconds) until ``may_regroup``; False if it never
    came or ``rep`` stopped leading."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CHANGE_WAIT
    while not rep.deposed:
        if may_regroup(rep, members, upto, adding=adding):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL)
    return False


class Regrouping(Changing, Protocol):
    """A leader that writes its new group itself (``leader.Replicator``,
    ``stream_leader.StreamReplicator``)."""

    members: list[str]
    joining: list[str] | None  # the group being written: a commit needs its majorities too


async def write_when_held(
    rep: Regrouping, members: list[str], write: Callable[[], Awaitable[bool]],
    refuse: Callable[[], Awaitable[None]], upto: int = 0, *, adding: bool = False,
) -> bool:  # fmt: skip
    """Writes the group ``members`` (``write``: True once the record is in etcd) when
    ``until_held``; else ``refuse`` tells the asker and the old group stays. While the
    record is being written a commit needs both groups' majorities. True when written."""
    if not await until_held(rep, members, upto, adding=adding):
        await refuse()
        return False
    rep.joining = members
    try:
        written = await write()
    finally:
        rep.joining = None
    if written:
        rep.members = members
    return written


def refusal(rep: Changing, name: str, members: Collection[str], upto: int = 0) -> str:
    """Why a change was not made, as the asker is told it."""
    return (
        f"members {list(members)} of '{name}' did not catch up with the leader's commit "
        f"index {needed(rep, upto)} within {CHANGE_WAIT:.0f} s; the group is unchanged"
    )
