"""The leader's side of a replicated quorum queue: every change of the queue becomes a
log record carrying the leader's term, shipped to the other members over the links.

A publish is written to the leader's own store at once but joins the queue (and can be
delivered) only when a majority of the members, the leader included, hold it on disk;
its publisher's confirm waits for that too (a ``Pending`` operation of the core's one
durability wait). First deliveries and removals (ack, drop) are shipped the same way but
nobody waits for them (a client's ack has no answer in AMQP). A member's link coming up,
or a member refusing a batch, gets a full snapshot (``RESET`` and every live message).
A member answering with a newer term deposes this leader: what was not committed is
nacked and nothing more is taken. So does the loss of its majority: every half second
an idle member gets an empty batch (a heartbeat it answers at once), and a leader that
heard from no majority for ``stepdown_after`` seconds (``role.py``) steps down: its
uncommitted tail is nacked and dropped, and the manager resigns its election, so the
members that still reach each other elect the one with the longest log.

A leader hands messages out (to any consumer of the queue here, a peer node's
subscription included) and confirms publishes only while it ``serving()``: not deposed,
and this node's etcd lease surely alive (``fence.py``). Once the lease may have run out,
the members may elect another leader, which delivers the same messages again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.quorum.catchup import SnapshotStream
from roost.cluster.quorum.role import LeaderRole
from roost.cluster.wire import properties_of
from roost.core.errors import BrokerError
from roost.core.queues.entry import Entry

if TYPE_CHECKING:
    from roost.cluster.link.transport import LinkManager
    from roost.cluster.quorum.standin import QuorumStandIn
    from roost.core.broker import Broker
    from roost.core.message import Message
    from roost.core.queues.quorum import QuorumQueue

log = logging.getLogger("roost.cluster.quorum")


WATCHDOG = 1.0  # seconds a member's acks may stand still while it is behind


class NotLeader(BrokerError):
    pass


def _always() -> bool:
    return True


def _never() -> bool:
    return False


class Replicator(LeaderRole):
    def __init__(
        self,
        broker: Broker,
        links: LinkManager,
        queue: QuorumQueue,
        node: str,
        members: list[str],
        on_deposed: Callable[[], None] | None = None,
    ) -> None:
        self.broker = broker
        self.links = links
        self.queue = queue
        self.node = node
        self.members = members
        self.term = 0  # 0 until the election is won
        self.elected = 0  # the term won, while its group record is written (``started``)
        self.deposed = False
        self.refusing = False  # leaving its group (regroup.py): publishes are refused
        # promoted: the index of its term's first record (``inherit``); a member holds
        # what the old term committed once it holds this (the term's first snapshot)
        self.term_start = 0
        self.on_deposed = on_deposed
        self.index = 0  # the last log index written
        self.own_durable = 0
        self.acked: dict[str, int] = {}  # member -> the index it holds on disk
        self.commit_index = 0
        self.live: dict[int, Entry] = {}  # seq -> entry, every message in the queue
        # seq -> (entry, log index, Pending number) of publishes not yet committed
        self.uncommitted: dict[int, tuple[Entry, int, int]] = {}
        self.outbox: list[bytes] = []
        self.first_out = 1  # the index of outbox[0]
        self.need_snapshot: set[str] = set(self.followers)
        self._flush_scheduled = False
        self._progress: dict[str, float] = {}  # member -> when its acks last moved
        self.snapshot_at: dict[str, int] = {}  # member -> the index of its last snapshot
        self._watchdog: asyncio.TimerHandle | None = None
        # deposed: this node's stand-in for the new leader, which remembers the acks of
        # what was delivered here (its consumers move there; standin.py)
        self.successor: QuorumStandIn | None = None
        self.streams: dict[str, SnapshotStream] = {}  # member -> its snapshot under way
        self.heard: dict[str, float] = {}  # member -> when its last ack arrived
        self.fenced = False  # this node's lease went unrenewed too long (fence.py)
        self.in_lease: Callable[[], bool] = _always  # reads the clock (Membership.in_lease)
        # fenced, but so is a majority of the members: etcd is out of reach for all of
        # them, so none can elect another leader (fence.py)
        self.fenced_together: Callable[[], bool] = _never
        queue.serving = self.serving  # the queue hands nothing out while this says no

    def online(self) -> list[str]:
        """Members up and in sync: this leader, and followers whose link is up, that
        hold the last snapshot sent to them and whose acks are not standing still
        while they are behind."""
        now = asyncio.get_running_loop().time()
        return [self.node] + [
            m
            for m in self.followers
            if self.links.link(m) is not None
            and m not in self.need_snapshot
            and self.acked.get(m, 0) >= self.snapshot_at.get(m, 0)
            and (self.acked.get(m, 0) >= self.index or now - self._progress.get(m, now) < WATCHDOG)
        ]

    def serving(self) -> bool:
        """May this leader hand messages out and confirm now: not deposed, and its
        node's lease renewed recently enough (the clock, read now: right after a paused
        process resumes, before the fence's own timer has run), or a majority of the
        members cut off from etcd with it."""
        if self.deposed:
            return False
        return (not self.fenced and self.in_lease()) or self.fenced_together()

    def fence(self, fenced: bool) -> None:
        """This node is cut off from etcd (``True``): nothing more is handed out or
        confirmed here; or its lease was renewed in time (``False``): what waited goes."""
        self.fenced = fenced
        self.wake()

    def wake(self) -> None:
        """Serving (again): what waited for the fence to lift is confirmed and handed out."""
        if self.term and self.serving():
            self._commit()
            self.queue.dispatch()

    # -- the queue's hooks

    def push(self, message: Message) -> bool:
        q = self.queue
        if self.deposed or self.refusing:
            q.refusal = f"{q._where()}: this node is no longer its leader"
            return False
        q._seq += 1
        entry = Entry(q._seq, message)
        features = q.features
        if features is not None and not features.admit(entry):  # TTL, reject-publish
            q.refusal = f"{q._where()} is full (overflow {features.settings.overflow})"
            return False
        q.stat_published += 1
        if q.store is not None:
            entry.slot = q.store.append(
                message.exchange, message.routing_key, message.properties.as_tuple(), message.body
            )
        self.live[entry.seq] = entry
        index = self._record(
            r.enq(
                entry.seq,
                False,
                message.exchange,
                message.routing_key,
                properties_of(message),
                message.body,
            )
        )
        self.uncommitted[entry.seq] = (entry, index, self.broker.pending.issue())
        self.broker.message_store.when_durable(lambda ok: self._own(index, ok))
        return True

    def delivered(self, entry: Entry) -> None:
        if entry.seq in self.live:  # every delivery: its count survives a failover
            self._record(r.delivered(entry.seq, entry.deliveries))

    def forgotten(self, entry: Entry) -> None:
        if self.deposed and self.successor is not None:  # the new leader redelivers it
            self.successor.remember(entry.seq & 0xFFFFFFFF, self.queue.numbering)
        if self.live.pop(entry.seq, None) is not None:
            self._record(r.mark(r.DEL, entry.seq))

    def inherit(self, entries: list[Entry], sure_seq: int) -> None:
        """A promoted member's copy, before ``started``: what its old leader had told
        it was committed (numbered up to ``sure_seq``), or had handed out (only what
        was committed reaches consumers), is ready at once. The rest may
        be what the old leader never committed (only this member got it; a member
        elected instead would lack it): it reaches consumers only once a majority holds
        this term's first snapshot, which carries it. That snapshot stands for the
        ``TERM`` record written here, so its commit is the term's first. No publisher
        waits on these (the Pending number 0 is never issued)."""
        index = self.term_start = self._record(r.mark(r.TERM, 0))
        q = self.queue
        for entry in entries:
            self.live[entry.seq] = entry
            if entry.seq <= sure_seq or entry.deliveries:
                q._own_ready().append(entry)
                q.ready_bytes += entry.size
            else:
                self.uncommitted[entry.seq] = (entry, index, 0)
        self.broker.message_store.when_durable(lambda ok: self._own(index, ok))
        q.dispatch()

    def close(self, why: str = "queue deleted") -> None:
        """The queue is gone here (deleted, or another node leads it now)."""
        self.deposed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        for stream in self.streams.values():
            stream.cancel()
        for _entry, _index, number in self.uncommitted.values():
            self.broker.pending.finish(number, NotLeader(why))
        self.uncommitted.clear()

    # -- the log

    def _record(self, raw: bytes) -> int:
        self.index += 1
        self.outbox.append(raw)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        return self.index

    def started(self, term: int) -> None:
        """The election is won: ship what waited for it. Leading a copy no record of
        this term names (recovered from disk, kept after stepping down, a one-member
        queue growing), its first record is a ``TERM`` too, so the members' acks tell
        who holds that copy (``safechange.py``)."""
        self.term = term
        if self.live and not self.index:
            self.term_start = self._record(r.mark(r.TERM, 0))
            self.broker.message_store.when_durable(lambda ok: self._own(1, ok))
        self.need_snapshot = set(self.followers)
        self._last_check = asyncio.get_running_loop().time()
        self.heard = dict.fromkeys(self.followers, self._last_check)
        self.flush()
        self._watch()

    def _watch(self) -> None:
        """Once a second: a member whose link is up but whose acks have not moved while it
        is behind gets a snapshot again (what was sent may have reached a node that was
        still starting, before it listened for records)."""
        if self.deposed:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        for member in self.followers:
            self._progress.setdefault(member, now)  # a member just added is watched too
            behind = self.acked.get(member, 0) < self.index
            if not behind or self.links.link(member) is None or member in self.streams:
                self._progress[member] = now
            elif now - self._progress.get(member, now) > WATCHDOG:
                self._progress[member] = now
                self.resync(member)
        if self.lost_majority(now, also_heard=self.streams):
            self.step_down()
            return
        self._heartbeat()
        self._watchdog = loop.call_later(WATCHDOG / 2, self._watch)

    def _heartbeat(self) -> None:
        """An empty batch to every member that has all records so far: it answers at
        once, so an idle leader still learns whether a majority hears it."""
        if self.outbox or self._flush_scheduled or not self.stepdown_after:
            return
        q = self.queue
        beat = f.Replicate(q.vhost.name, q.name, self.term, self.index + 1, self.commit_index, [])
        for member in self.followers:
            link = self.links.link(member)
            if link is not None and member not in self.need_snapshot | self.streams.keys():
                link.send(beat)

    def step_down(self, why: str = "") -> None:
        """No majority answered for ``stepdown_after`` seconds (or ``why``: this node's
        lease ran out while it was fenced, ``fence.py``): nothing more is taken or
        confirmed here; the uncommitted tail is nacked and dropped from this copy (a
        member may hold it: the next leader decides). The manager resigns the election."""
        why = why or f"no majority of {self.members} answered for {self.stepdown_after:.1f} s"
        log.warning("queue '%s': %s; stepping down (term %d)", self.queue.name, why, self.term)
        store = self.queue.store
        for seq, (entry, _index, number) in self.uncommitted.items():
            if not number:
                continue  # inherited: the old term may have committed it, so it stays
            self.live.pop(seq, None)
            if store is not None and entry.slot:
                store.remove(entry.slot)
        self.close("its leader lost the majority of its members")
        if self.on_lost_majority is not None:
            self.on_lost_majority()

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self.term or self.deposed:
            return
        batch, first = self.outbox, self.first_out
        self.outbox, self.first_out = [], self.index + 1
        q = self.queue
        for member in self.followers:
            link = self.links.link(member)
            if link is None:
                self.need_snapshot.add(member)
                continue
            if member in self.need_snapshot:
                self.need_snapshot.discard(member)
                self.snapshot_at[member] = self.index
                self.streams[member] = SnapshotStream(self, member, link)  # catchup.py
            elif member in self.streams:
                self.streams[member].backlog.extend(batch)  # after the snapshot's end
            elif batch:
                link.send(
                    f.Replicate(q.vhost.name, q.name, self.term, first, self.commit_index, batch)
                )
        self._commit()

    def resync(self, member: str) -> None:
        if member in self.followers:
            stream = self.streams.pop(member, None)
            if stream is not None:
                stream.cancel()
            self.need_snapshot.add(member)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self.flush)

    # -- acknowledgements and commit

    def acknowledged(self, member: str, ack: f.ReplicateAck) -> None:
        if ack.term > self.term and self.term:
            log.warning(
                "queue '%s': deposed by term %d (ours %d)", self.queue.name, ack.term, self.term
            )
            self.close("a newer leader was elected")
            if self.on_deposed is not None:
                self.on_deposed()
            return
        if ack.term != self.term:
            return
        self.heard[member] = asyncio.get_running_loop().time()
        if not ack.ok:
            self.resync(member)
            return
        if ack.durable_index > self.acked.get(member, 0):
            self._progress[member] = asyncio.get_running_loop().time()
        self.acked[member] = max(self.acked.get(member, 0), ack.durable_index)
        self._commit()

    @property
    def held_here(self) -> int:
        """Everything it wrote (its own fsync is awaited for publishes only; a delivery or
        ack record it counts as committed without it is on a majority of the followers)."""
        return self.index

    @property
    def committed(self) -> int:
        return self.commit_index

    def _commit(self) -> None:
        if not self.term or not self.serving():  # fenced: confirms wait, as deliveries do
            return
        commit = self._majority_holds()
        if commit <= self.commit_index:
            return
        self.commit_index = commit
        q = self.queue
        pending = self.broker.pending
        while self.uncommitted:
            seq, (entry, index, number) = next(iter(self.uncommitted.items()))
            if index > commit:
                break
            del self.uncommitted[seq]
            # consumers see it only now
            if seq in self.live and (q.ready or not q._offer(entry)):
                q._own_ready().append(entry)
                q.ready_bytes += entry.size
                q.flow.after_push()
                if q.features is not None:
                    q.features.enqueued(entry)  # drop-head, the head's TTL timer
            pending.finish(number)
