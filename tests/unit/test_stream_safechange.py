"""When a replicated stream's leader may write a new group (``stream_change.py``, the
quorum queues' rule in ``safechange.py``), sans-IO: a real stream queue and the real
``StreamReplicator`` and ``StreamMembers`` over the memory broker, links that record the
frames, the members' acks given by hand, and an election that records the group records
it is asked to write (etcd's part).

The loss these guard against: n2 taken out of {n1, n2, n3} while n3 lags records n1 and
n2 committed, a node added at once, n1 killed before n3 caught up: n3 and the empty
newcomer are a majority of {n1, n3, n4} and elect n3, which lacks confirmed records."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from roost.cluster.link import frames as f
from roost.cluster.quorum import safechange
from roost.cluster.quorum.safechange import may_regroup
from roost.cluster.quorum.stream_leader import StreamReplicator
from roost.cluster.quorum.stream_members import StreamMembers
from roost.core.message import Message, Properties
from roost.core.queues.stream import StreamQueue
from roost.store.stream_store import StreamFiles
from tests.brokers import memory_broker
from tests.quorum_links import Links

KEY = ("/", "s")


def ack(rep: StreamReplicator, member: str, end: int) -> None:
    rep.acknowledged(member, f.ReplicateAck("/", "s", rep.term, end, True))


async def settled(rep: StreamReplicator) -> None:
    """This node's own writes are durable (the memory store's fsync is a callback)."""
    while rep.own_durable < rep.queue.log.next_offset:
        await asyncio.sleep(0)


async def leading(data: Path, published: int, *, inherited: int = 0) -> StreamReplicator:
    """n1 leads {n1, n2, n3} (term 5) with ``inherited`` records on its disk from an
    older term, then ``published`` more: n2 holds them all (committed), n3 nothing."""
    broker = memory_broker(stream_storage=StreamFiles(data))
    vhost = broker.vhosts["/"]
    vhost.declare_queue("s", durable=True, arguments={"x-queue-type": "stream"})
    queue = vhost.queues["s"]
    assert isinstance(queue, StreamQueue)
    for n in range(inherited):
        assert queue.push(Message("", "s", Properties(), b"old%d" % n))
    rep = StreamReplicator(broker, Links(("n2", "n3")), queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
    queue.replication = rep
    rep.started(5)
    for n in range(published):
        assert queue.push(Message("", "s", Properties(), b"m%d" % n))
    await settled(rep)
    if published:
        ack(rep, "n2", queue.log.next_offset)
        assert rep.commit == queue.log.next_offset == inherited + published
    return rep


class Election:
    """The leader's election as the membership code uses it: the group records it writes
    (etcd's fenced transaction) are kept, in order."""

    def __init__(self) -> None:
        self.written: list[list[str]] = []
        self.resigned = False
        self.change = asyncio.Event()

    async def fenced_txn(self, _compares: list[Any], ops: list[Any]) -> Any:
        self.written.append(json.loads(ops[0].value)["members"])
        self.change.set()
        return SimpleNamespace(succeeded=True)

    async def resign(self) -> None:
        self.resigned = True


def control(rep: StreamReplicator, election: Election) -> StreamMembers:
    """The real ``StreamMembers`` over the one stream ``rep`` leads here."""
    groups = SimpleNamespace(
        name="n1",
        leading={KEY: rep},
        elections={KEY: election},
        node=SimpleNamespace(coordinator=None),  # nothing asked has an id to answer
        _key=lambda kind, key: f"/roost/{kind}/{key[0]}/{key[1]}",
    )
    return StreamMembers(groups)  # type: ignore[arg-type]


async def turns(n: int = 10) -> None:
    """Lets a waiting change look at the acks a few times."""
    for _ in range(n):
        await asyncio.sleep(safechange.POLL)


def test_taking_out_a_member_waits_until_the_new_group_holds_the_commit(tmp_path: Path) -> None:
    async def main() -> None:
        rep = await leading(tmp_path, 3)
        election = Election()
        change = asyncio.create_task(
            control(rep, election).apply(KEY, {"op": "delete", "node": "n2"})
        )
        await turns()
        assert election.written == []  # n3 lags: {n1, n3} would hold only offset 0
        ack(rep, "n3", 2)
        await turns()
        assert election.written == []
        ack(rep, "n3", 3)
        await change  # n3 holds the commit: written
        assert election.written == [["n1", "n3"]] and rep.members == ["n1", "n3"]
        rep.close()

    asyncio.run(main())


def test_an_empty_member_is_added_only_when_every_majority_meets_a_holder(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        rep = await leading(tmp_path, 3)
        rep.members = ["n1", "n3"]  # n2 taken out by an older leader's change
        rep.acked.pop("n2")
        assert not may_regroup(rep, ["n1", "n3", "n4"], adding=True)  # {n3, n4} holds none
        election = Election()
        change = asyncio.create_task(control(rep, election).apply(KEY, {"op": "add", "node": "n4"}))
        await turns()
        assert election.written == []
        ack(rep, "n3", 3)
        await change
        assert election.written == [["n1", "n3", "n4"]]  # n4 counts as holding nothing
        rep.close()

    asyncio.run(main())


def test_a_hand_over_waits_for_the_log_end_on_a_majority_of_the_rest(tmp_path: Path) -> None:
    """No fixed wait: the group is written as the acks reach the log's end."""

    async def main() -> None:
        rep = await leading(tmp_path, 3)
        election = Election()
        members = control(rep, election)
        change = asyncio.create_task(members.apply(KEY, {"op": "delete", "node": "n1"}))
        await turns()
        assert rep.refusal  # publishes are refused while it waits
        assert election.written == []  # {n2, n3}: both must hold the log, n3 holds none
        ack(rep, "n3", 3)
        await change
        assert election.written == [["n2", "n3"]] and election.resigned
        assert rep.deposed and KEY not in members.groups.leading and KEY in members.left

    asyncio.run(main())


def test_a_group_that_does_not_catch_up_is_refused_and_left_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(safechange, "CHANGE_WAIT", 0.0)  # the deadline has passed at once

    async def main() -> None:
        rep = await leading(tmp_path, 3)
        election = Election()
        members = control(rep, election)
        await members.apply(KEY, {"op": "delete", "node": "n2"})
        await members.apply(KEY, {"op": "delete", "node": "n1"})  # a hand-over
        assert election.written == [] and rep.members == ["n1", "n2", "n3"]
        assert not rep.refusal and not rep.deposed and KEY not in members.left
        why = safechange.refusal(rep, "s", ["n1", "n3"])
        assert why == (
            "members ['n1', 'n3'] of 's' did not catch up with the leader's commit index 3"
            " within 0 s; the group is unchanged"
        )
        rep.close()

    asyncio.run(main())


def test_a_promoted_leader_waits_until_the_new_group_holds_what_it_inherited(
    tmp_path: Path,
) -> None:
    """Its commit starts at its committed mark, but the old term may have confirmed the
    records it inherited: the new group must hold up to its term's ``SYNC``."""

    async def main() -> None:
        rep = await leading(tmp_path, 0, inherited=3)
        assert rep.commit == 0 and rep.term_start == 3
        assert not may_regroup(rep, ["n1", "n3"])
        ack(rep, "n3", 3)
        assert may_regroup(rep, ["n1", "n3"])
        rep.close()

    asyncio.run(main())


def test_while_the_new_group_is_written_a_commit_needs_both_groups(tmp_path: Path) -> None:
    async def main() -> None:
        rep = await leading(tmp_path, 3)
        ack(rep, "n3", 3)
        rep.joining = ["n1", "n3", "n4"]  # every majority of it must meet a holder
        assert rep.queue.push(Message("", "s", Properties(), b"m3"))
        await settled(rep)
        ack(rep, "n2", 4)
        assert rep.commit == 3  # n1 and n2 are the old majority; {n3, n4} holds none
        ack(rep, "n3", 4)
        assert rep.commit == 4
        rep.joining = None
        rep.close()

    asyncio.run(main())
