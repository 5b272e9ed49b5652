"""When a quorum queue's leader may write a new group (``cluster/quorum/safechange.py``),
sans-IO: the real ``Replicator`` over the memory broker, links that record the frames.

The loss these guard against: n2 taken out of {n1, n2, n3} while n3 lags records n1 and
n2 committed, a node added at once, n1 killed before n3 caught up: n3 and the empty
newcomer are a majority of {n1, n3, n4} and elect n3, which lacks confirmed messages."""

from __future__ import annotations

import asyncio

from roost.cluster.link import frames as f
from roost.cluster.quorum.candidacy import may_campaign
from roost.cluster.quorum.leader import Replicator
from roost.cluster.quorum.safechange import held_by, may_regroup
from roost.core.message import Message, Properties
from roost.core.queues.entry import Entry
from roost.core.queues.quorum import QuorumQueue
from tests.brokers import memory_broker
from tests.quorum_links import Links


async def leading(published: int) -> Replicator:
    """n1 leads {n1, n2, n3} (term 5); ``published`` messages are on its disk, n2 holds
    them all (committed), n3 nothing."""
    broker = memory_broker()
    queue = QuorumQueue(broker.catalog.vhosts["/"], "q", durable=True)
    rep = Replicator(broker, Links(), queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
    queue.replication = rep
    rep.started(5)
    for n in range(published):
        assert queue.push(Message("", "q", Properties(), b"m%d" % n))
    for _ in range(20):
        await asyncio.sleep(0.01)
        if rep.own_durable == rep.index:
            break
    rep.acknowledged("n2", f.ReplicateAck("/", "q", 5, rep.index, True))
    assert rep.commit_index == rep.index == published
    return rep


def test_taking_out_a_member_waits_until_the_new_group_holds_the_commit_index() -> None:
    async def main() -> None:
        rep = await leading(3)
        assert held_by(rep, ["n1", "n2", "n3"], 2) == 3  # n1 and n2
        assert held_by(rep, ["n1", "n2", "n3"], 3) == 0  # n3 nothing
        assert not may_regroup(rep, ["n1", "n3"])  # n3 lags: {n1, n3} holds only 0
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 5, 2, True))
        assert not may_regroup(rep, ["n1", "n3"])
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 5, 3, True))
        assert may_regroup(rep, ["n1", "n3"])

    asyncio.run(main())


def test_the_loss_the_rule_prevents() -> None:
    """What went wrong when the record was written at once: n3 and the newcomer n4 make a
    majority of {n1, n3, n4} with n1 dead, and n3 (position 0) may campaign."""
    assert may_campaign("n3", (5, 0), {"n4": (0, 0)}, ["n1", "n3", "n4"], ["n3", "n4"])

    async def main() -> None:
        rep = await leading(3)
        assert not may_regroup(rep, ["n1", "n3"])  # so {n1, n3} is never written here
        # had it been written: n4 is not added until n3 holds it too
        assert not may_regroup(rep, ["n1", "n3", "n4"], adding=True)
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 5, 3, True))
        assert may_regroup(rep, ["n1", "n3", "n4"], adding=True)  # n4 counts as none

    asyncio.run(main())


def test_an_empty_member_is_added_when_every_majority_of_the_new_group_meets_a_holder() -> None:
    async def main() -> None:
        rep = await leading(3)
        assert may_regroup(rep, ["n1", "n2", "n3", "n4"], adding=True)  # n1 or n2 in each 3
        assert not may_regroup(rep, ["n1", "n2", "n3", "n4"])  # not a majority holding it
        rep.members = ["n1"]  # a one-member queue grows: {n1, n2} always meets n1
        assert may_regroup(rep, ["n1", "n4"], adding=True)
        assert not may_regroup(rep, ["n3", "n4"], adding=True)

    asyncio.run(main())


def test_a_hand_over_waits_for_the_whole_log_on_a_majority_of_the_rest() -> None:
    async def main() -> None:
        rep = await leading(3)
        rest = ["n2", "n3"]
        assert not may_regroup(rep, rest, rep.index)  # n3 behind: a 2-group needs both
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 5, 3, True))
        assert may_regroup(rep, rest, rep.index)
        assert not may_regroup(rep, rest, rep.index + 1)  # a record neither holds yet

    asyncio.run(main())


def test_while_the_new_group_is_written_a_commit_needs_both_groups() -> None:
    async def main() -> None:
        rep = await leading(3)
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 5, 3, True))
        rep.joining = ["n1", "n3", "n4"]  # every majority of it must meet a holder
        rep.queue.push(Message("", "q", Properties(), b"m3"))
        for _ in range(20):
            await asyncio.sleep(0.01)
            if rep.own_durable == 4:
                break
        rep.acknowledged("n2", f.ReplicateAck("/", "q", 5, 4, True))
        assert rep.commit_index == 3  # n1 and n2 are the old majority; {n3, n4} has none
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 5, 4, True))
        assert rep.commit_index == 4
        rep.joining = None

    asyncio.run(main())


def test_a_promoted_leader_waits_until_the_new_group_holds_its_terms_first_snapshot() -> None:
    """Its commit index starts at 0, but what it inherited was committed by the old
    term: taking a member out at once could leave a group that lacks it."""

    async def main() -> None:
        broker = memory_broker()
        queue = QuorumQueue(broker.catalog.vhosts["/"], "q", durable=True)
        rep = Replicator(broker, Links(), queue, "n2", ["n1", "n2", "n3"])  # type: ignore[arg-type]
        queue.replication = rep
        copy = [Entry(seq, Message("", "q", Properties(), b"m")) for seq in (1, 2)]
        rep.inherit(copy, sure_seq=2)  # committed by the old leader n1 (with n2)
        rep.started(7)
        assert rep.commit_index == 0
        assert not may_regroup(rep, ["n2", "n3"])  # n1 taken out: n3 may lack them
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 7, 1, True))  # its snapshot
        assert may_regroup(rep, ["n2", "n3"])

    asyncio.run(main())


def test_the_leaders_own_acks_and_deliveries_do_not_hold_a_change_up() -> None:
    """Its own fsync is awaited for publishes only: records of acks committed by the
    followers leave its durable index behind, and a change must not wait for it."""

    async def main() -> None:
        rep = await leading(3)
        entry = next(iter(rep.live.values()))
        rep.queue.consumers.clear()
        rep.forgotten(entry)  # an ack: a DEL record, index 4
        await asyncio.sleep(0.05)
        for member in ("n2", "n3"):
            rep.acknowledged(member, f.ReplicateAck("/", "q", 5, 4, True))
        assert rep.commit_index == 4 and rep.own_durable == 3
        assert may_regroup(rep, ["n1", "n3"])

    asyncio.run(main())


def test_a_leader_of_a_recovered_copy_waits_until_the_new_group_holds_that_copy() -> None:
    """Re-elected with the copy it recovered from disk (``manager._rejoin``): no record
    of its term named those messages, so a member's ack could not tell who held them."""

    async def main() -> None:
        broker = memory_broker()
        queue = QuorumQueue(broker.catalog.vhosts["/"], "q", durable=True)
        rep = Replicator(broker, Links(), queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
        queue.replication = rep
        for seq in (1, 2):
            rep.live[seq] = Entry(seq, Message("", "q", Properties(), b"m"))
        rep.started(8)
        assert rep.term_start == rep.index == 1
        assert not may_regroup(rep, ["n1", "n3"])
        rep.acknowledged("n3", f.ReplicateAck("/", "q", 8, 1, True))  # its snapshot
        assert may_regroup(rep, ["n1", "n3"])

    asyncio.run(main())
