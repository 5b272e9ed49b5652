"""A member of a replicated stream that does not lead: writes the leader's records into its
own copy of the stream's log (the same files a local stream has) at the same offsets, and
acknowledges the offset after them once the group commit that covers them ran (fsync).

Fencing as a quorum queue's follower (``follower.py``): a batch of an older term than the
newest seen, or of a term whose leader's key vanished, is refused. A batch that does not
start at this copy's next offset is refused too (the leader syncs it again), and so is
one of a term whose ``SYNC`` this copy has not taken yet.

Catch-up: the copy knows how far its records are committed (``known``: the leader's
commit as its frames carry it, capped at this copy's end, kept on disk as the store's
committed mark). Committed records are in every later leader's log at the same offsets,
so on a ``SYNC`` of a new term the copy keeps them and cuts only what follows, in place
(``StreamStore.truncate``); within the term it synced, its whole log is the leader's and
stays. It answers its end and the leader ships the rest. If the leader's first offset is
past that end (retention dropped what it would need), the copy starts again, empty, at
the leader's first offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from roost.cluster.link import frames as f
from roost.cluster.quorum.stream_leader import (
    MARK_EVERY,
    OFS,
    SYNC,
    SYNC_HEAD,
    decode,
    decode_offset,
)
from roost.core.queues.stream_args import int_arg, parse_max_age

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.core.durability import MessageStore, StreamStore
    from roost.core.queues.streams import Streams

log = logging.getLogger("roost.cluster.quorum")


def open_log(streams: Streams, vhost: str, name: str, arguments: dict[str, Any]) -> StreamStore:
    """The stream's log as a ``StreamQueue`` opens it (same directory, same limits)."""
    return streams.open_store(
        vhost,
        name,
        arguments,
        max_segment_bytes=int_arg(arguments, "x-stream-max-segment-size-bytes"),
        max_bytes=int_arg(arguments, "x-max-length-bytes"),
        max_age_ms=parse_max_age(arguments.get("x-max-age")),
    )


class StreamFollower:
    def __init__(
        self,
        streams: Streams,
        store: MessageStore,
        vhost: str,
        name: str,
        arguments: dict[str, Any],
    ) -> None:
        self.streams = streams
        self.message_store = store
        self.vhost = vhost
        self.queue = name
        self.arguments = arguments
        self.log = open_log(streams, vhost, name, arguments)
        self.term = 0
        self.fence = 0
        self.leader = ""
        self.durable_index = self.log.next_offset  # reopened: on disk
        self.stored: dict[str, int] = {}  # named consumers' offsets the leader sent
        self.synced = 0  # the term whose SYNC this copy took: its batches are welcome
        self.marked = 0  # the newest term whose marker this copy holds (``position``)
        self.term_start = 0  # the synced leader's term start: its marker's offset
        self.generation = 0  # one per SYNC: an older batch's late fsync answers nothing
        # records below ``known`` are committed (the same at every member, every term)
        self.known = min(self.log.committed_mark, self.log.next_offset)
        self._mark: asyncio.TimerHandle | None = None

    @property
    def position(self) -> tuple[int, int]:
        """(term, durable offset): the longest log campaigns first on failover. The term
        is that of the newest leader whose marker this copy holds: it took that leader's
        ``SYNC`` and holds every record the leader was elected with (its ``term_start``),
        as a Raft member holding a new leader's empty entry. Not the newest term seen: a
        newer term's batch refused before its ``SYNC``, or a ``SYNC`` taken with the
        leader's inherited records still to come, leaves older terms' records here,
        which must not rank as the newer term's (Raft compares the last record's term,
        "Figure 8")."""
        return (self.marked, self.durable_index)

    def receive(self, link: Link, frame: f.Replicate) -> None:
        if frame.term < self.term or frame.term <= self.fence:
            self._answer(link, ok=False)
            return
        self.term = frame.term
        self.leader = link.peer
        entries = frame.entries
        if entries and entries[0][:1] == OFS:  # stored offsets: kept, not acknowledged
            for raw in entries:
                name, offset = decode_offset(raw)
                self.log.store_offset(name, offset)
                self.stored[name] = offset
            if frame.term == self.synced:  # its commit too (StreamStats here reads it)
                self._note_commit(frame.commit_index)
            return
        if entries and entries[0][:1] == SYNC:
            _k, commit, first, term_start = SYNC_HEAD.unpack(entries[0])
            self._sync(frame.term, first)
            self.term_start = term_start
            self._note_commit(commit)
            self._after_fsync(link)
            return
        if frame.term != self.synced or frame.first_index != self.log.next_offset:
            self._answer(link, ok=False)
            return
        for raw in entries:
            r = decode(raw)
            written = self.log.append(
                r.exchange, r.routing_key, r.properties, r.body, timestamp_ms=r.timestamp,
                producer=r.producer, publishing_id=r.publishing_id,
            )  # the producer's id too: deduplication survives a failover
            if written != r.offset:  # cannot happen while offsets follow on; never serve it
                self._start_over()
                self._answer(link, ok=False)
                return
        self._note_commit(frame.commit_index)
        self._after_fsync(link)

    def _sync(self, term: int, first: int) -> None:
        """A leader's ``SYNC``: keep what is known committed (all of it within the term
        synced already), cut the rest in place; start at ``first`` if the leader no longer
        has what this copy would need."""
        before = self.log.next_offset
        if term != self.synced and before > self.known:
            self.known = min(self.known, self.log.truncate(self.known))
        kept = self.log.next_offset
        if kept < first:
            self.log.restart_at(first)
            self.known = first
            with contextlib.suppress(OSError):
                self.log.mark_committed(first)
        self.synced = term
        self.generation += 1
        self.durable_index = min(self.durable_index, self.log.next_offset)
        log.info(
            "stream '%s': copy synced in term %d: kept offsets up to %d, cut %d records,"
            " catching up from %d",
            self.queue,
            term,
            kept,
            before - kept,
            self.log.next_offset,
        )

    def _note_commit(self, commit: int) -> None:
        """Records below the leader's commit are committed here too (this copy is a prefix
        of the synced leader's log); the mark on disk follows within ``MARK_EVERY``."""
        known = min(commit, self.log.next_offset)
        if known > self.known:
            self.known = known
            if self._mark is None:
                self._mark = asyncio.get_running_loop().call_later(MARK_EVERY, self._write_mark)

    def _write_mark(self) -> None:
        self._mark = None
        with contextlib.suppress(OSError):  # a hint: a stale one only ships more
            self.log.mark_committed(self.known)

    def _after_fsync(self, link: Link) -> None:
        term, upto, generation = self.term, self.log.next_offset, self.generation
        self.message_store.changed()  # the next group commit runs even for a bare SYNC

        def durable(ok: bool) -> None:
            if ok and term == self.term and generation == self.generation:
                self.durable_index = max(self.durable_index, upto)
                if term == self.synced and self.durable_index >= self.term_start:
                    self.marked = term  # holds the synced leader's marker
                self._answer(link, ok=True)

        self.message_store.when_durable(durable)

    def _start_over(self) -> None:
        self.log.destroy()
        self.log = open_log(self.streams, self.vhost, self.queue, self.arguments)
        self.durable_index = self.known = self.synced = self.marked = 0

    def _answer(self, link: Link, *, ok: bool) -> None:
        term = max(self.term, self.fence + 1) if not ok else self.term
        link.send(f.ReplicateAck(self.vhost, self.queue, term, self.durable_index, ok))

    def close(self) -> None:
        if self._mark is not None:
            self._mark.cancel()
            self._write_mark()
        self.log.close()
