"""A replicated stream's leader writing a new group (``stream_members.py`` decides the
members), by the quorum queues' rule (``safechange.py``): only once a majority of the
new group holds the leader's commit index (for an addition, once every majority of it
meets a holder), and a leader leaving its group only once a majority of the others hold
its whole log. A new group that does not catch up within ``CHANGE_WAIT`` is not written;
the asker is told why. Without it: n2 taken out of {n1, n2, n3} while n3 lags records
n1 and n2 committed, a node added, n1 killed before n3 catches up: n3 and the empty
newcomer elect n3, and the committed records are lost.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.quorum import safechange
from roost.cluster.quorum.members import answer_refused

if TYPE_CHECKING:
    from roost.cluster.election import Election
    from roost.cluster.quorum.groupbase import Key
    from roost.cluster.quorum.stream_leader import StreamReplicator
    from roost.cluster.quorum.stream_members import StreamMembers

log = logging.getLogger("roost.cluster.quorum")


async def regroup(
    control: StreamMembers, key: Key, rep: StreamReplicator, election: Election,
    members: list[str], target: int, request: dict[str, Any], upto: int = 0,
    *, adding: bool = False, leaving: bool = False,
) -> bool:  # fmt: skip
    """Writes the group ``members`` once they hold what they must (``upto``: a
    hand-over's log end); until then the old group stays. True when written.
    ``leaving``: this node is not in ``members`` (its copy goes once the stream is
    replaced by a stand-in)."""

    async def refuse() -> None:
        why = safechange.refusal(rep, key[1], members, upto)
        log.warning("stream %s: %s", key, why)
        if not rep.deposed:
            groups = control.groups
            req_key = groups._key("stream-req", key)
            await answer_refused(groups.node.coordinator, req_key, request, why)

    async def write() -> bool:
        if leaving:  # out of the group: its copy goes, records still in flight are ignored
            control.left.add(key)
        written = await control._write(key, rep, election, members, target, request)
        if leaving and not written:
            control.left.discard(key)
        return written

    return await safechange.write_when_held(rep, members, write, refuse, upto, adding=adding)


async def hand_over(
    control: StreamMembers, key: Key, rep: StreamReplicator, election: Election,
    members: list[str], target: int, request: dict[str, Any],
) -> None:  # fmt: skip
    """Taken out of its own group: publishes are refused, the new group is written once
    a majority of the others acked the log's end (the one they elect holds it all), and
    this leader resigns; its stream is replaced by a stand-in."""
    rep.refusal = f"{rep.queue._where()}: leaving its group"  # publishes refused
    end = rep.queue.log.next_offset
    if not await regroup(control, key, rep, election, members, target, request, end,
                         leaving=True):  # fmt: skip
        rep.refusal = ""
        return
    control.groups.elections.pop(key, None)
    control.groups.leading.pop(key, None)
    rep.close("leadership handed over")
    await election.resign()
    log.warning("stream %s: left its group, leadership handed to %s", key, members)
