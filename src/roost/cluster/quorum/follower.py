"""A member that does not lead: applies the leader's records to its own copy of the
queue in the message store (``store/``: the same files a local queue has), and
acknowledges an index once the group commit that covers it ran (fsync).

Fencing: a record batch of an older term than the newest this member has seen is
refused (``ok=False`` with our term), so a deposed leader can commit nothing here. So is
one of a term whose election key this member saw vanish (``fence``, set by the manager
when the failover starts): a leader paused past its lease that resumes before the new
leader's first batch reached this member still commits nothing. A
batch that does not follow on from the last index (a gap after a lost link) is refused
too; the leader then sends a full snapshot (``RESET``), streamed in chunks
(``catchup.py``): ``upto`` is acknowledged only once the last chunk is applied, and a
chunk of another snapshot than the one under way is refused.

What it held before a snapshot (or a new term) began is kept on disk until the snapshot
is durable (``kept``): the leader counted that copy towards its majority and may have
confirmed records only a majority holds; dropped at the first chunk, a failover while
the snapshot streams (a resync under load, a new leader's first batch) elected a member
that lacked them. Until then the member's ``position`` is the kept copy's, and it is
the copy a promotion serves (``restore_kept``).

A member's ``position`` names the term whose snapshot its copy holds whole and durable
(``marked``), never just the newest term seen: every term begins, at each member, with
a snapshot, so a batch of a term whose ``RESET`` this member has not taken (that chunk
lost with a link) is refused as a gap. Applied, it would have ended ``kept`` and ranked
a copy lacking the snapshot's messages above the older term's longer log.

What the copy holds that its leader has committed is known by message number
(``sure_seq``: every message numbered up to it is committed in this term): each batch
carries the leader's commit index, and within a term a message's number grows with the
index of its ``ENQ`` (a snapshot's messages stand at its ``upto``). Promoted, the member
serves those at once and holds back the rest until its own term commits them
(``Replicator.inherit``).

On a disk store the copy outlives a restart: a member record (``store/member_log.py``)
names each message's number and the state above (term, fence, ``marked``, durable
index), written in the commit of the records it covers, so nothing is acknowledged that
the record lacks; the fence is on disk before the member writes its position
(``persist``). Recovered, the member takes a snapshot again before any further batch.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from roost.cluster.errors import ClusterError
from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.wire import message_of

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.core.durability import MemberCopy, MemberRecord, MessageStore, QueueStore


class Follower:
    def __init__(
        self, store: MessageStore, vhost: str, queue: str, copy: MemberCopy | None = None
    ) -> None:
        """``copy``: the one this node kept across a restart (``store/member_log.py``)."""
        self.message_store = store
        self.vhost = vhost
        self.queue = queue
        self.store: QueueStore
        self.member: MemberRecord | None
        self.store, self.member = store.open_member(vhost, queue) if copy is None else copy[:2]
        self.term = 0  # the newest term seen
        self.synced = 0  # the term of the last snapshot begun (its RESET applied)
        self.marked = 0  # the newest term whose snapshot this copy holds whole and durable
        self.fence = 0  # terms up to here are refused: their leader's key is gone
        self.leader = ""
        self.max_seq = 0  # the highest message number any record named
        # the leader's run of numbers the copy's numbers belong to (a RESET names it);
        # promoted, this node keeps it (``manager._swap``); 0: not known
        self.numbering = 0
        self.last_index = 0  # every record up to here applied (durable once acked)
        self.durable_index = 0
        # seq -> (slot in our store, body size, times delivered), in the leader's order
        self.held: dict[int, tuple[int, int, int]] = {}
        self.snapshot = -1  # the ``upto`` of a snapshot whose next chunk is awaited
        self.snapshot_count = 0  # the messages of that snapshot applied so far
        # the copy held before a snapshot or a new term began, and its (term, durable
        # index): kept until the snapshot that replaces it is durable
        self.kept: dict[int, tuple[int, int, int]] | None = None
        self.kept_position = (0, 0)
        self.kept_numbering = 0
        self.snapshot_end = -1  # the index whose durability ends ``kept``; -1: streaming
        self.sure_seq = 0  # every message numbered up to here is committed
        self.kept_sure = 0  # the kept copy's
        self.leader_commit = 0  # the commit index this term's leader last named
        self.unsure: deque[tuple[int, int]] = deque()  # (index, number) of ENQs past it
        self.snapshot_top = 0  # the highest message number of the snapshot under way
        # an old leader that lost its copy: a position at least its true one, written
        # for elections (never campaigned on) until a snapshot makes its copy whole
        self.bound: tuple[int, int] | None = None
        if copy is not None:
            self._restore(copy[2], copy[3])

    def _restore(self, state: dict[str, Any], held: dict[int, tuple[int, int, int]]) -> None:
        """Its copy and position as its record left them. Nothing is taken as synced:
        a leader's next batch is refused as a gap and a snapshot (``RESET``) follows."""
        self.held = held
        self.term, self.fence = int(state["term"]), int(state["fence"])
        self.marked, self.durable_index = int(state["marked"]), int(state["durable"])
        self.sure_seq = int(state["sure_seq"])
        self.max_seq = max(int(state["max_seq"]), max(held, default=0))
        self.numbering = int(state.get("numbering", 0))

    def _note(self, durable: int) -> None:
        """The state into the member record, in the commit of what it covers: an ack
        leaves after that commit, so the record never claims less than was acked."""
        if self.member is None:
            return
        self.member.note(
            {
                "term": self.term,
                "fence": self.fence,
                "marked": self.marked,
                "durable": durable,
                "sure_seq": self.sure_seq,
                "max_seq": self.max_seq,
                # a copy half replaced by a snapshot holds numbers of two runs: none kept
                "numbering": self.numbering if self.kept is None else 0,
                "kept": self.kept is not None,  # a snapshot under way: not a whole copy
            }
        )

    async def persist(self) -> None:
        """The fence on disk before this member writes its position for an election:
        restarted, it must still refuse the leader it saw go (Raft's current term)."""
        if self.member is None:
            return
        self._note(self.durable_index)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def settle(ok: bool) -> None:
            if not done.done():
                done.set_result(ok)

        self.message_store.when_durable(settle)
        if not await done:
            raise ClusterError("the member record could not be written")  # tried again

    @property
    def position(self) -> tuple[int, int]:
        """(term, durable index) of the copy this member would serve if elected."""
        if self.bound is not None:
            return self.bound
        return self.kept_position if self.kept is not None else (self.marked, self.durable_index)

    def restore_kept(self) -> None:
        """Promoted while a snapshot streams: the partial copy goes, the kept one serves."""
        if self.kept is None:
            return
        self._drop_all()
        self.held, self.kept = self.kept, None
        self.sure_seq = self.kept_sure
        self.numbering = self.kept_numbering

    def _keep(self, position: tuple[int, int]) -> None:
        if self.kept is None:
            self.kept, self.kept_position, self.kept_sure = self.held, position, self.sure_seq
            self.kept_numbering = self.numbering
            self.held = {}
        else:
            self._drop_all()  # the partial copy of an earlier snapshot
        self.snapshot_end = -1

    def receive(self, link: Link, frame: f.Replicate) -> None:
        if frame.term < self.term or frame.term <= self.fence:
            self._answer(link, ok=False)
            return
        if frame.term > self.term:
            self._keep(self.position)
            self.term = frame.term
            self.last_index = self.durable_index = self.leader_commit = self.sure_seq = 0
            self.snapshot = -1
            self.unsure.clear()  # known again only once this term's snapshot commits
        self.leader = link.peer
        self._learn(frame.commit_index)
        entries = frame.entries
        first = entries[0][:1] if entries else b""
        if first == r.SNAP and (
            r.decode(entries[0])[1] != self.snapshot
            or r.count_of(entries[0]) != self.snapshot_count
        ):
            self._answer(link, ok=False)  # a chunk of another snapshot, or one lost before
            return
        if first not in (r.RESET, r.SNAP) and (
            self.synced != self.term
            or self.snapshot >= 0
            or frame.first_index != self.last_index + 1
        ):
            self._answer(link, ok=False)  # a gap: the leader resends a snapshot
            return
        if not entries:  # the leader's heartbeat: answered at once, nothing to store
            self._answer(link, ok=True)
            return
        upto = frame.first_index + len(entries) - 1
        for at, raw in enumerate(entries, frame.first_index):
            kind, seq, message = r.decode(raw)
            if kind not in (r.RESET, r.SNAP, r.MORE) and seq > self.max_seq:  # theirs: upto
                self.max_seq = seq
            if kind == r.RESET:
                self.max_seq = max(self.max_seq, r.top_of(raw))  # promoted, numbers above
                self._keep(self.position)
                self.numbering = r.numbering_of(raw)
                self.synced = self.term
                self.snapshot = upto = seq
                self.snapshot_count = self.snapshot_top = 0
                self.durable_index = 0  # it holds nothing for sure until the last chunk
            elif kind == r.SNAP:
                upto = seq
            elif kind == r.MORE:
                return  # the snapshot goes on in the next frame: nothing to ack yet
            elif message is not None:
                self._enqueue(message)
                self.snapshot_count += 1
                if self.snapshot >= 0:
                    self.snapshot_top = max(self.snapshot_top, seq)
                else:
                    self.unsure.append((at, seq))
            elif kind == r.DEL:
                found = self.held.pop(seq, None)
                if found is not None:
                    self._remove(found[0])
            elif kind == r.DLV:
                found = self.held.get(seq)
                if found is not None:
                    if not found[2]:
                        self.store.mark_delivered(found[0])
                    self.held[seq] = (found[0], found[1], max(found[2], r.count_of(raw)))
        if self.snapshot >= 0:  # its last chunk: its messages stand at ``upto``
            self.unsure.clear()
            self.unsure.append((upto, self.snapshot_top))
        self.snapshot = -1
        self.last_index = upto
        self._learn(frame.commit_index)
        if self.kept is not None and self.snapshot_end < 0:
            self.snapshot_end = upto  # the replacing copy is whole: it ends ``kept`` once durable
        term = self.term
        self._note(upto)
        self.message_store.when_durable(lambda ok: self._durable(link, term, upto, ok))

    def _learn(self, commit: int) -> None:
        """The leader named ``commit``: the messages written up to it are committed."""
        self.leader_commit = max(self.leader_commit, commit)
        unsure = self.unsure
        while unsure and unsure[0][0] <= self.leader_commit:
            self.sure_seq = max(self.sure_seq, unsure.popleft()[1])

    def _enqueue(self, e: r.Enq) -> None:
        props = message_of(e.exchange, e.routing_key, e.properties, b"").properties
        slot = self.store.append(e.exchange, e.routing_key, props.as_tuple(), e.body)
        if e.delivered:
            self.store.mark_delivered(slot)
        self.held[e.seq] = (slot, len(e.body), e.delivered)
        if self.member is not None:
            self.member.enqueued(slot, e.seq)

    def _remove(self, slot: int) -> None:
        self.store.remove(slot)
        if self.member is not None:
            self.member.removed(slot)

    def _drop_all(self) -> None:
        for slot, _size, _delivered in self.held.values():
            self._remove(slot)
        self.held.clear()

    def _durable(self, link: Link, term: int, upto: int, ok: bool) -> None:
        if not ok or term != self.term:
            return
        self.durable_index = max(self.durable_index, upto)
        if self.kept is not None and 0 <= self.snapshot_end <= upto:
            for slot, _size, _delivered in self.kept.values():
                self._remove(slot)
            self.kept = None
            self.marked = term
            self.bound = None
            self._note(self.durable_index)  # a whole copy: recovered from the next commit
        self._answer(link, ok=True)

    def _answer(self, link: Link, *, ok: bool) -> None:
        # a fenced-off leader is told of a newer term than its own, so it stands down
        term = max(self.term, self.fence + 1) if not ok else self.term
        link.send(f.ReplicateAck(self.vhost, self.queue, term, self.durable_index, ok))
