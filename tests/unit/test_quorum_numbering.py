"""A message's number (seq) is given once per queue: a member promoted to leader numbers
new messages above every number its old leader gave, the numbers of messages acked
before the member's snapshot too. A stand-in remembers its clients' acks by number
(``standin.py``), so a number given twice could settle, or drop at a promotion, a
message no client acked. Sans-IO: the real ``Replicator`` over the memory broker and a
real ``Follower``, with links that record the frames sent."""

from __future__ import annotations

import asyncio

from roost.cluster.quorum import records as r
from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.leader import Replicator
from roost.core.queues.entry import Entry
from roost.core.queues.quorum import QuorumQueue
from roost.store.memory import MemoryStore
from tests.brokers import memory_broker
from tests.quorum_links import Links, Wire, batch
from tests.unit.quorum_messages import message


async def snapshot_of_a_queue_whose_newest_messages_were_acked() -> None:
    broker = memory_broker()
    queue = QuorumQueue(broker.catalog.vhosts["/"], "work", durable=True)
    links = Links(("n2",))
    rep = Replicator(broker, links, queue, "n1", ["n1", "n2"])  # type: ignore[arg-type]
    queue.replication = rep
    queue._seq = 7  # 1 to 7 given; 4 to 7 acked since: only 3 is left
    rep.live[3] = Entry(3, message(b"m3"))
    rep.started(9)
    for _ in range(5):  # the snapshot stream goes out
        await asyncio.sleep(0)
    (snapshot,) = links.wires["n2"].sent
    assert r.decode(snapshot.entries[0])[0] == r.RESET
    assert r.top_of(snapshot.entries[0]) == 7
    member = Follower(MemoryStore(), "/", "work")
    member.receive(Wire(), snapshot)  # type: ignore[arg-type]
    assert list(member.held) == [3]
    # promoted, it numbers from here (manager._swap: queue._seq = follower.max_seq)
    assert member.max_seq == 7
    rep.close()


def test_a_member_snapshot_names_the_highest_number_its_leader_gave() -> None:
    asyncio.run(snapshot_of_a_queue_whose_newest_messages_were_acked())


def test_a_reset_without_a_top_leaves_the_numbering_as_the_records_name_it() -> None:
    member = Follower(MemoryStore(), "/", "q")
    member.receive(Wire(), batch(2, 0, r.mark(r.RESET, 4)))  # type: ignore[arg-type]
    assert member.max_seq == 0 and r.top_of(r.mark(r.RESET, 4)) == 0
