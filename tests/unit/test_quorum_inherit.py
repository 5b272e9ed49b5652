"""A promoted member's copy may hold messages its old leader never committed (only this
member got them): the new leader serves at once only what the old leader had said was
committed or had handed out, and the rest once a majority holds its term's first
snapshot, which carries them. Sans-IO: the real ``Replicator`` over the memory broker,
with links that record the frames sent."""

from __future__ import annotations

import asyncio

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.quorum.leader import Replicator
from roost.core.queues.entry import Entry
from roost.core.queues.quorum import QuorumQueue
from tests.brokers import memory_broker
from tests.quorum_links import Links
from tests.unit.quorum_messages import message


async def promoted() -> None:
    broker = memory_broker()
    queue = QuorumQueue(broker.catalog.vhosts["/"], "work", durable=True)
    links = Links(("n2", "n3"))
    rep = Replicator(broker, links, queue, "n1", ["n1", "n2", "n3"])  # type: ignore[arg-type]
    queue._seq = 5
    queue.replication = rep
    # as _promote does: its old leader had said 3 was committed and had handed out 5
    # (so it was committed too); nothing says 4 was
    copy = [Entry(seq, message(b"m%d" % seq)) for seq in (3, 4, 5)]
    copy[2].redelivered, copy[2].deliveries = True, 1
    rep.inherit(copy, sure_seq=3)
    rep.started(9)
    for _ in range(5):  # the snapshot streams go out
        await asyncio.sleep(0)
    for wire in links.wires.values():
        (snapshot,) = wire.sent
        kinds = [r.decode(raw)[:2] for raw in snapshot.entries]
        assert kinds == [(r.RESET, 1), (r.ENQ, 3), (r.ENQ, 4), (r.ENQ, 5)]  # for TERM (1)
    # this node alone holds the new term's copy: a consumer gets only what was committed
    assert [e.seq for e in queue.ready] == [3, 5] and queue.message_count == 2
    assert queue.push(message(b"m6"))  # index 2
    await asyncio.sleep(0)
    assert [b.first_index for b in links.wires["n2"].sent[1:]] == [2]
    rep.acknowledged("n2", f.ReplicateAck("/", "work", 9, 1, True))  # its snapshot, durable
    assert [e.seq for e in queue.ready] == [3, 5, 4]  # committed: the copy, not yet m6
    rep.acknowledged("n2", f.ReplicateAck("/", "work", 9, 2, True))
    assert [e.seq for e in queue.ready] == [3, 5, 4, 6]
    assert broker.pending.issued == 1  # one publisher waited; the copy's messages none
    rep.close()


def test_a_promoted_copy_is_ready_only_once_a_majority_holds_the_new_terms_snapshot() -> None:
    asyncio.run(promoted())
