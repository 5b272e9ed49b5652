"""A member's (or any other node's) stand-in for a replicated quorum queue: the data
plane's ``RemoteQueue`` pointed at the queue's leader, which survives the leader's loss:
its consumers are not cancelled, and when another member is elected the stand-in is
pointed at it (``rehome``) and subscribes there again."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from roost.cluster.link import frames as f
from roost.cluster.stand_in import RemoteEntry, RemoteQueue
from roost.core.queues.paged import PagedReady

if TYPE_CHECKING:
    from roost.cluster.remote import DataPlane
    from roost.core.message import Message
    from roost.core.queues.entry import Entry
    from roost.core.queues.quorum import QuorumQueue
    from roost.core.vhost import VHost

# how many of this node's latest acks of a replicated queue it remembers by message number
# (an ack on its way to a leader that stops before it is replicated is lost there: the
# gap is milliseconds, 4096 acks a fast consumer's half second; about 250 KB a stand-in
# at most, with a consumer's prefetch of old delivery tags acked after a change of leader)
ACKED_MEMORY = 4096


class QuorumGroup:
    """What management shows of a queue led elsewhere (RabbitMQ's leader / members /
    online); ``online`` is the members the leader last said were in sync (in the group
    record, ``regroup.py``) whose node is running."""

    def __init__(self, leader: str, members: list[str], running: Any) -> None:
        self.leader = leader
        self.members = members
        self.in_sync: list[str] | None = None  # None: the leader has not said yet
        self._running = running

    def online(self) -> list[str]:
        up = set(self._running())
        return [m for m in self.members if m in up and (self.in_sync is None or m in self.in_sync)]


class QuorumStandIn(RemoteQueue):
    kind = "quorum"
    survives_home = True  # remote.DataPlane: not cancelled when the leader's node goes

    def __init__(self, plane: DataPlane, vhost: VHost, item: dict[str, Any], home: str) -> None:
        super().__init__(plane, vhost, item, home)
        self.group: QuorumGroup | None = None
        # the queue's numbers (mod 2**32) of messages this node's clients acked lately
        self.acked: set[int] = set()
        self._acked_order: deque[int] = deque()
        # the leader's run of numbers ``acked`` names (``QuorumQueue.numbering``): a
        # leader recovered from its own disk numbers its messages afresh from 1, so an
        # old number may name a message no client saw; kept across a promoted member,
        # which keeps its leader's numbers. 0: none known yet.
        self.numbering = 0
        self.successor: QuorumQueue | None = None  # this node leads the queue now
        self.retired = False  # replaced by the queue this node leads now (``retire``)

    # -- acks survive a change of leader

    def settle(self, entry: Entry) -> None:
        """An ack is remembered by the message's number: the leader it went to may stop
        before its followers hear of it, or the leader may have changed since the
        delivery (its delivery id is void then); the next leader's copy is then settled
        here (``arrived``, or ``successor`` when this node leads it now)."""
        home_seq = getattr(entry, "home_seq", 0)
        if home_seq:
            successor = self.successor
            if (
                successor is not None
                and successor.numbering == self.numbering
                and take_acked(successor, home_seq)
            ):
                self.unacked -= 1
                self.stat_acked += 1
                return
            self.remember(home_seq, self.numbering)
        super().settle(entry)

    def remember(self, home_seq: int, numbering: int) -> None:
        """``numbering``: the run ``home_seq`` belongs to; the memory holds one run."""
        if numbering != self.numbering:
            self.subscribed(numbering)
        if home_seq in self.acked:
            return
        self.acked.add(home_seq)
        self._acked_order.append(home_seq)
        if len(self._acked_order) > ACKED_MEMORY:
            self.acked.discard(self._acked_order.popleft())

    def subscribed(self, numbering: int) -> None:
        """The leader's deliveries are numbered in ``numbering`` from now on. Another run
        (a leader recovered from its own disk, or one not known) makes the memory void:
        forgetting an ack can only cost a redelivery the client sees, marked redelivered;
        keeping it could ack, unseen, a confirmed message that took a remembered number."""
        if numbering != self.numbering or not numbering:
            self.acked.clear()
            self._acked_order.clear()
            self.numbering = numbering

    def arrived(
        self, delivery_id: int, redelivered: bool, message: Message, home_seq: int = 0
    ) -> None:
        """A redelivery of a message this node's client acked already (its ack was lost
        with the old leader) is acked to the new one, not handed out again."""
        if redelivered and home_seq in self.acked:
            self.acked.discard(home_seq)
            entry = RemoteEntry(0, message, delivery_id, home_seq)
            self.plane.settle(self, entry, f.SettleOp.ACK, requeue=False)
            return
        super().arrived(delivery_id, redelivered, message, home_seq)

    def lost_home(self) -> None:
        """What this node's clients hold from the old leader can no longer be settled
        there: their acks are dropped (the new leader redelivers those messages, marked
        redelivered) instead of settling other messages under reused delivery ids."""
        for consumer in self.consumers:
            for queue, entry, _c in consumer.session._unacked.values():
                if queue is self:
                    entry.delivery_id = 0  # type: ignore[attr-defined]
        super().lost_home()

    def retire(self) -> None:
        """This node leads the queue now (``manager._swap``): the subscription at the
        old leader ends there (Cancel: a link that never went down, a partition shorter
        than its silence limit or a paused leader resumed, kept it relaying the old
        leader's queue to a stand-in that is gone), and what it sent ahead is dropped
        here without a word to it. The promoted copy holds those messages; rejecting them
        there (``_give_back``) or purging its queue made the old leader, deposed, remember
        them as acked by this node's clients (``Replicator.forgotten``), and its stand-in
        then acked their redeliveries from the new leader: confirmed messages lost."""
        self.retired = True
        self.plane.unsubscribe(self)
        self.ready.clear()
        self.ready_bytes = 0

    def purge(self) -> int:
        if self.retired:  # deleted in the promoted queue's place: nothing to ask the home
            return 0
        return super().purge()

    def rehome(self, home: str) -> None:
        """Another member was elected leader: publishes and consumers go there now."""
        if home == self.home:
            return
        # the old subscription ends here (its id was left registered, so a cancel from a
        # resumed old leader ended the new one) and at the old leader if it is reachable
        self.plane.unsubscribe(self)
        self.lost_home()
        self.home = home
        if self.group is not None:
            self.group.leader = home
        if self.consumers:
            self.plane.subscribe(self)


def take_acked(queue: QuorumQueue, home_seq: int) -> bool:
    """The ready copy (a redelivery) of a message a client acked under the old leader
    leaves ``queue`` for good; False when there is none (handed out already, or gone)."""
    ready = queue.ready
    if isinstance(ready, PagedReady):
        # a promoted copy's queue pages its backlog (``attach_store``); the copy's
        # redeliveries were read back with their messages into the head, never packed
        ready = ready.head
    if not isinstance(ready, deque):
        return False
    for entry in ready:
        if entry.redelivered and entry.seq & 0xFFFFFFFF == home_seq:
            ready.remove(entry)
            queue.ready_bytes -= entry.size
            queue._forget(entry)  # its removal is replicated (a DEL record)
            return True
    return False
