"""A member of a replicated stream that does not lead: writes the leader's records into its
own copy of the stream's log (the same files a local stream has) at the same offsets, and
acknowledges the offset after them once the group commit that covers them ran (fsync).

Fencing as a quorum queue's follower (``follower.py``): a batch of an older term than the
newest seen, or of a term whose leader's key vanished, is refused. A batch that does not
start at this copy's next offset is refused too (the leader syncs it again). A ``SYNC``
record names the leader's commit: a copy holding records past it may hold some the new
leader never had, so it starts again empty and takes everything from the leader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.cluster.link import frames as f
from roost.cluster.quorum.stream_leader import OFS, SYNC, SYNC_HEAD, decode, decode_offset
from roost.core.queues.stream_args import int_arg, parse_max_age

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.core.durability import MessageStore, StreamStore
    from roost.core.queues.streams import Streams


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

    @property
    def position(self) -> tuple[int, int]:
        """(term, durable offset): the longest log campaigns first on failover."""
        return (self.term, self.durable_index)

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
            return
        if entries and entries[0][:1] == SYNC:
            _k, commit = SYNC_HEAD.unpack(entries[0])
            if self.log.next_offset > commit or self.log.first_offset > 0:
                self._start_over()
            self.durable_index = min(self.durable_index, self.log.next_offset)
            self._after_fsync(link)
            return
        if frame.first_index != self.log.next_offset:
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
        self._after_fsync(link)

    def _after_fsync(self, link: Link) -> None:
        term, upto = self.term, self.log.next_offset
        self.message_store.changed()  # the next group commit runs even for a bare SYNC

        def durable(ok: bool) -> None:
            if ok and term == self.term:
                self.durable_index = max(self.durable_index, upto)
                self._answer(link, ok=True)

        self.message_store.when_durable(durable)

    def _start_over(self) -> None:
        self.log.destroy()
        self.log = open_log(self.streams, self.vhost, self.queue, self.arguments)
        self.durable_index = 0

    def _answer(self, link: Link, *, ok: bool) -> None:
        term = max(self.term, self.fence + 1) if not ok else self.term
        link.send(f.ReplicateAck(self.vhost, self.queue, term, self.durable_index, ok))

    def close(self) -> None:
        self.log.close()
