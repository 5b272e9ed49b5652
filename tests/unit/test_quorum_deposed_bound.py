"""A leader deposed by a newer term (or stepped down) follows at once with an empty copy
(``deposed.release`` destroyed the store of the queue it led): until the new leader's
snapshot is durable here, it votes with the position of the log it led as a bound, so
that a member lacking what that log may have committed cannot win once the new leader
is lost too; it never campaigns on it. Sans-IO: ``candidacy.may_campaign`` decides."""

from __future__ import annotations

from roost.cluster.quorum import records as r
from roost.cluster.quorum.candidacy import may_campaign
from roost.cluster.quorum.deposed import release, stand_down
from roost.cluster.quorum.follower import Follower
from roost.cluster.quorum.leader import Replicator
from roost.core.queues.quorum import QuorumQueue
from roost.store.memory import MemoryStore
from tests.brokers import memory_broker
from tests.quorum_links import Wire, batch, enq

QUORUM = {"x-queue-type": "quorum"}
MEMBERS = ["n1", "n2", "n3"]


def led_here(term: int, index: int) -> tuple[QuorumQueue, Replicator]:
    vhost = memory_broker().catalog.vhosts["/"]
    queue = QuorumQueue(vhost, "q", durable=True, arguments=dict(QUORUM))
    vhost.adopt_queue(queue)
    rep = Replicator(None, None, queue, "n1", MEMBERS)  # type: ignore[arg-type]
    queue.replication = rep
    rep.term, rep.index = term, index  # it wrote ``index`` records of its term
    return queue, rep


def test_a_deposed_leader_votes_for_the_log_it_led_until_made_whole() -> None:
    """n1 led term 11 up to index 40; n2 won term 12, deposed n1 and was then lost
    before n1 or n3 held its snapshot. n3, at (11, 39), may lack a record n1 committed
    with n2's ack: with n1's empty position, (0, 0), counted it would win; with the
    bound it waits (for n2, or for a member holding more). n1 never campaigns on it
    (``manager._may_campaign``: a bounded member only votes)."""
    queue, rep = led_here(11, 40)
    stand_down(rep)
    bound = release(queue.vhost, "q")  # manager.follow, before the member's copy opens
    assert bound == (11, 40)
    member = Follower(MemoryStore(), "/", "q")
    member.bound = bound
    running = ["n1", "n3"]
    assert may_campaign("n3", (11, 39), {"n1": (0, 0)}, MEMBERS, running)  # unbounded
    assert not may_campaign("n3", (11, 39), {"n1": member.position}, MEMBERS, running)
    assert may_campaign("n3", (12, 3), {"n1": member.position}, MEMBERS, running)
    # the new leader's first batch: a snapshot, durable at once in memory, ends the bound
    member.receive(Wire(), batch(12, 0, r.mark(r.RESET, 3), enq(1)))  # type: ignore[arg-type]
    assert member.bound is None and member.position == (12, 3)


def test_a_restarted_leader_that_lost_its_election_has_no_log_to_bound() -> None:
    """It never led a term (``_rejoin`` lost): nothing is bounded by its position."""
    queue, _rep = led_here(0, 0)
    assert release(queue.vhost, "q") is None
