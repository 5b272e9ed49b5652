"""Who may campaign for a quorum queue's vacant leadership, sans-IO.

Every record a leader confirmed is held on disk by a majority of the members. A member
whose position (term, durable index) is at least that of every other running member in a
*majority* that wrote its position for this vacancy holds every confirmed record: any two
majorities share a member. Waiting a fixed time for the others' positions is not enough:
a member that reads them before a longer one wrote its own (a loaded host, a slow etcd
round) would win with a shorter log, and the others would then drop what it lacks when
they follow it. So a member campaigns only once a majority's positions are in and none
of the running ones is ahead (ties go to the smaller name); it never campaigns over a
longer member that is still running. One that stops running (its lease expired) no
longer counts, so the rest can go on without it if they are still a majority. A node
that is not in the group's record (taken out, its copy going) never campaigns.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

Position = tuple[int, int]  # (the newest term the member followed, its durable index)


def may_campaign(
    me: str,
    mine: Position,
    written: Mapping[str, Position],
    members: Collection[str],
    running: Collection[str],
) -> bool:
    """``written``: the positions the members wrote since the leader's key went (``me``
    may be among them); ``running``: the nodes that hold their etcd lease."""
    if me not in members:
        return False  # taken out of the group (or not yet in it): its copy is not counted
    others = {m: p for m, p in written.items() if m != me and m in members and m in running}
    if 1 + len(others) < len(members) // 2 + 1:
        return False  # no majority heard from: one of the silent may hold more
    return not any(p > mine or (p == mine and m < me) for m, p in others.items())
