"""The leader's side of a replicated stream: the records appended to its log are shipped,
offset for offset, to the other members over the links (``Replicate`` frames of the
leader's term, as a quorum queue's); a publisher's confirm waits until a majority of the
members, the leader included, hold the message on disk, and consumers read only below
that offset (``StreamQueue.committed``).

A stream's log index is its offset: ``Replicate.first_index`` is the first record's
offset and a member's ``ReplicateAck.durable_index`` the offset after its last durable
record. A member seen for the first time in a term, or whose link came up again, or
that refused a batch, is sent a ``SYNC`` record first (the leader's commit and first
offset): the member keeps the records it knows are committed, cuts the rest of its log in
place (``stream_follower.py``) and answers its end; the leader ships only the records
from there. A member that needs records retention dropped here starts again at the
leader's first offset. Leader and members keep how far their log is known to be
committed on disk (``StreamStore.mark_committed``), so a restarted node keeps its prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple

from roost.cluster.link import frames as f
from roost.cluster.quorum.leader import NotLeader
from roost.cluster.quorum.role import LeaderRole
from roost.cluster.wire import message_of, properties_of
from roost.core.message import Message, Properties

if TYPE_CHECKING:
    from roost.cluster.link.transport import LinkManager
    from roost.core.broker import Broker
    from roost.core.durability import StreamRecord
    from roost.core.queues.stream import StreamQueue

log = logging.getLogger("roost.cluster.quorum")

WATCHDOG = 1.0  # seconds a member's acks may stand still while it is behind
MARK_EVERY = 0.1  # seconds between two writes of the committed mark (a stale one is safe)
BATCH_BYTES = 1 << 20  # one Replicate frame carries about this much

SYNC, REC, OFS = b"S", b"M", b"O"
# kind, the leader's commit, its first offset, its term's first offset (``term_start``)
SYNC_HEAD = struct.Struct("!cQQQ")
_OFS = struct.Struct("!cQ")  # kind, a named consumer's stored offset (the name follows)
# kind, offset, timestamp, publishing id, lengths of the producer name, exchange, routing
# key and properties: a member's copy keeps each record's producer and publishing id, so
# a promoted member deduplicates a retried publish as its leader did (and answers
# QueryPublisherSequence with the same id)
_REC = struct.Struct("!cQqqHHHI")


def sync_record(commit: int, first: int, term_start: int = 0) -> bytes:
    return SYNC_HEAD.pack(SYNC, commit, first, term_start)


def offset_record(name: str, offset: int) -> bytes:
    return _OFS.pack(OFS, offset) + name.encode()


def decode_offset(raw: bytes) -> tuple[str, int]:
    _k, offset = _OFS.unpack_from(raw)
    return raw[_OFS.size :].decode(), offset


def encode(record: StreamRecord, producer: str = "", publishing_id: int = 0) -> bytes:
    offset, timestamp, exchange, routing_key, values, body = record
    message = Message(exchange, routing_key, Properties(*values), body)
    ex, rk, props = exchange.encode(), routing_key.encode(), properties_of(message)
    name = producer.encode()
    head = _REC.pack(
        REC, offset, timestamp, publishing_id, len(name), len(ex), len(rk), len(props)
    )
    return b"".join((head, name, ex, rk, props, body))


class Shipped(NamedTuple):
    offset: int
    timestamp: int
    exchange: str
    routing_key: str
    properties: tuple[Any, ...]
    body: bytes
    producer: str  # "" when the publish named none
    publishing_id: int


def decode(raw: bytes) -> Shipped:
    """A ``REC`` as the leader shipped it."""
    _k, offset, timestamp, publishing_id, nl, exl, rkl, pl = _REC.unpack_from(raw)
    at = _REC.size
    producer = raw[at : at + nl].decode()
    at += nl
    exchange = raw[at : at + exl].decode()
    at += exl
    routing_key = raw[at : at + rkl].decode()
    at += rkl
    props = message_of(exchange, routing_key, raw[at : at + pl], b"").properties
    body = raw[at + pl :]
    return Shipped(
        offset, timestamp, exchange, routing_key, props.as_tuple(), body, producer, publishing_id
    )


def commit_point(held: int, commit: int, term_start: int) -> int:
    """The commit a leader may move to when a majority holds the records below ``held``.

    Raft's rule (§5.4.2, "Figure 8"): records of older terms commit only together with
    one of the leader's own term. Raft's new leader appends an empty entry; a stream's
    records take offsets consumers see, so here the term's marker is its ``SYNC``,
    placed at ``term_start`` (the end of the log the leader was elected with): a member
    that took it and holds every record below ``term_start`` ranks with this term in
    the next election (``StreamFollower.position``), as a Raft member holding the empty
    entry does. So none of the inherited records commits until a majority holds them
    all; from there on, every record does as a majority holds it."""
    return held if held >= term_start else commit


class StreamReplicator(LeaderRole):
    keeps_copy = True  # replaced by a stand-in (deposed): the copy stays for its member

    def __init__(
        self, broker: Broker, links: LinkManager, queue: StreamQueue, node: str, members: list[str]
    ) -> None:
        self.broker = broker
        self.links = links
        self.queue = queue
        self.node = node
        self.members = members
        self.term = 0  # 0 until the election is won
        self.refusal = ""
        self.deposed = False
        self.own_durable = queue.log.next_offset  # what it recovered is on its disk
        self.acked: dict[str, int] = {}  # member -> the offset after its durable records
        self.sent: dict[str, int | None] = {}  # member -> next offset to send; None: syncing
        self.commit = 0
        # Raft's commit rule (§5.4.2, "Figure 8", ``commit_point``): the records this
        # leader inherited past what it knows committed (``floor``, its copy's committed
        # mark) are of older terms; counting their holders alone could commit a record
        # a later election overwrites, so they commit once a majority holds all of them
        self.term_start = queue.log.next_offset
        self.floor = min(queue.log.committed_mark, self.term_start)
        # named consumers' stored offsets known here (a member's copy gets them all)
        self.stored: dict[str, int] = {}
        self.waits: deque[tuple[int, int]] = deque()  # (offset after the publish, Pending number)
        self._progress: dict[str, float] = {}
        self._scheduled = False
        self._watchdog: asyncio.TimerHandle | None = None
        self._mark = 0  # the commit last written as the log's committed mark
        self._marked_at = 0.0
        # records shipped to each member since its last SYNC (the catch-up's size)
        self.shipped: dict[str, int] = {}
        self.heard: dict[str, float] = {}  # member -> when its last ack arrived
        queue.committed = 0

    @property
    def held_here(self) -> int:
        """What is on its own disk (every record's fsync is awaited)."""
        return self.own_durable

    @property
    def committed(self) -> int:
        return self.commit

    def online(self) -> list[str]:
        """This leader and the members whose link is up and that hold what is committed."""
        return [self.node] + [
            m
            for m in self.followers
            if self.links.link(m) is not None
            and self.sent.get(m) is not None
            and self.acked.get(m, 0) >= self.commit
        ]

    # -- the stream's hooks

    def appended(self) -> None:
        end = self.queue.log.next_offset
        self.waits.append((end, self.broker.pending.issue()))
        self.broker.message_store.when_durable(lambda ok: self._own(end, ok))
        self._schedule()

    def offset_stored(self, name: str, offset: int) -> None:
        """A named consumer's offset is kept on every member (no one waits for it)."""
        self.stored[name] = offset
        if self.term and not self.deposed:
            self._send_offsets([name])

    def _send_offsets(self, names: list[str], only: str = "") -> None:
        q = self.queue
        records = [offset_record(n, self.stored[n]) for n in names]
        for member in [only] if only else self.followers:
            link = self.links.link(member)
            if link is not None and self.sent.get(member) is not None and records:
                link.send(f.Replicate(q.vhost.name, q.name, self.term, 0, self.commit, records))

    def close(self, why: str = "queue deleted") -> None:
        self.deposed = True
        self.refusal = f"{self.queue._where()}: {why}"
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._mark < self.commit:
            with contextlib.suppress(RuntimeError):  # no loop: nothing to write
                self._write_mark()
        for _end, number in self.waits:
            self.broker.pending.finish(number, NotLeader(why))
        self.waits.clear()

    # -- shipping

    def started(self, term: int) -> None:
        self.term = term
        if self.floor > self.commit:  # committed by an earlier leader: readable at once
            self.commit = self.queue.committed = self.floor
        self._last_check = asyncio.get_running_loop().time()
        self.heard = dict.fromkeys(self.followers, self._last_check)
        for member in self.followers:
            self.sent[member] = None
            self._send_sync(member)
        if self.queue.consumers:
            self.queue.dispatch()
        self._commit()
        self._watch()

    def resync(self, member: str) -> None:
        if member in self.followers and self.term and not self.deposed:
            self.sent[member] = None
            self._send_sync(member)

    def _send_sync(self, member: str) -> None:
        link = self.links.link(member)
        if link is not None:
            q = self.queue
            link.send(
                f.Replicate(
                    q.vhost.name,
                    q.name,
                    self.term,
                    0,
                    self.commit,
                    [sync_record(self.commit, q.log.first_offset, self.term_start)],
                )
            )

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if not self.term or self.deposed:
            return
        end = self.queue.log.next_offset
        for member in self.followers:
            start = self.sent.get(member)
            link = self.links.link(member)
            if start is None or start >= end or link is None:
                continue
            self.sent[member] = self._ship(link, start, end)
        self._commit()

    def _ship(self, link: Any, start: int, end: int) -> int:
        q = self.queue
        reader = q.log.reader(start)
        try:
            while start < end:
                batch: list[bytes] = []
                size = 0
                first = start
                while start < end and size < BATCH_BYTES:
                    tagged = reader.next_tagged()
                    if tagged is None:
                        break
                    record, producer, publishing_id = tagged
                    raw = encode(record, producer, publishing_id)
                    batch.append(raw)
                    size += len(raw)
                    start = record[0] + 1
                if not batch:
                    break
                self.shipped[link.peer] = self.shipped.get(link.peer, 0) + len(batch)
                link.send(f.Replicate(q.vhost.name, q.name, self.term, first, self.commit, batch))
        finally:
            reader.close()
        return start

    def _watch(self) -> None:
        """Once a second: a member whose acks stand still while it is behind is synced
        again (a frame may have reached a node still starting)."""
        if self.deposed:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._mark < self.commit:
            self._write_mark()
        end = self.queue.log.next_offset
        for member in self.followers:
            if self.acked.get(member, -1) >= end or self.links.link(member) is None:
                self._progress[member] = now
            elif now - self._progress.setdefault(member, now) > WATCHDOG:
                self._progress[member] = now
                self.resync(member)
        if self.lost_majority(now):  # role.py: cut off from running members
            log.warning("stream '%s': no majority answered; stepping down", self.queue.name)
            self.close("its leader lost the majority of its members")
            if self.on_lost_majority is not None:
                self.on_lost_majority()
            return
        if self.stepdown_after:  # a heartbeat: an empty batch to each member holding all
            q = self.queue
            beat = f.Replicate(q.vhost.name, q.name, self.term, end, self.commit, [])
            for member in self.followers:
                link = self.links.link(member)
                if link is not None and self.sent.get(member) == end <= self.acked.get(member, -1):
                    link.send(beat)
        self._watchdog = loop.call_later(WATCHDOG / 2, self._watch)

    # -- acknowledgements and commit

    def acknowledged(self, member: str, ack: f.ReplicateAck) -> None:
        if ack.term > self.term and self.term:
            log.warning("stream '%s': deposed by term %d", self.queue.name, ack.term)
            self.close("a newer leader was elected")
            return
        if ack.term != self.term or member not in self.followers:
            return
        self.heard[member] = asyncio.get_running_loop().time()
        if not ack.ok:
            self.resync(member)
            return
        syncing = self.sent.get(member) is None
        if syncing and ack.durable_index > self.queue.log.next_offset:
            # it holds records it knows committed past this leader's end (this leader
            # was elected without them): never overwritten, never counted
            log.warning(
                "stream '%s': member %s holds committed records up to %d, past this"
                " leader's end %d: nothing shipped to it",
                self.queue.name,
                member,
                ack.durable_index,
                self.queue.log.next_offset,
            )
            return
        if ack.durable_index > self.acked.get(member, -1):
            self._progress[member] = asyncio.get_running_loop().time()
        self.acked[member] = ack.durable_index
        if syncing:  # the answer to a SYNC: ship from there
            if ack.durable_index < self.queue.log.first_offset:  # retention moved on
                self._send_sync(member)
                return
            self.sent[member] = ack.durable_index
            self.shipped[member] = 0
            log.info(
                "stream '%s': member %s synced at offset %d, shipping %d records",
                self.queue.name,
                member,
                ack.durable_index,
                self.queue.log.next_offset - ack.durable_index,
            )
            self._send_offsets(list(self.stored), only=member)
            self._schedule()
        self._commit()

    def _commit(self) -> None:
        if not self.term or self.deposed:
            return
        commit = commit_point(self._majority_holds(), self.commit, self.term_start)
        if commit <= self.commit:
            return
        self.commit = commit
        q = self.queue
        q.committed = commit
        if asyncio.get_running_loop().time() - self._marked_at >= MARK_EVERY:
            self._write_mark()  # else the watchdog writes it within WATCHDOG / 2
        pending = self.broker.pending
        while self.waits and self.waits[0][0] <= commit:
            pending.finish(self.waits.popleft()[1])
        if q.consumers:
            q.dispatch()

    def _write_mark(self) -> None:
        self._marked_at = asyncio.get_running_loop().time()
        self._mark = self.commit
        with contextlib.suppress(OSError):  # a hint: the next catch-up ships more
            self.queue.log.mark_committed(self.commit)
