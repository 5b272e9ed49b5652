"""What the core needs from durable storage, as Protocols the store implements.

The core never touches files: a durable queue holds a ``QueueStore`` and calls it when a
persistent message is enqueued, delivered, acknowledged or dropped; the broker asks the
``MessageStore`` to run a callback once what it buffered is on disk (publisher confirms).
A stream queue holds a ``StreamStore`` (its log, producers' ids and stored consumer
offsets) that the ``StreamStorage`` the server injects opens and finds again at start-up.
The one wait for what they make durable is ``core/completion.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

# A stored message as the store hands it back:
# (seq, redelivered, exchange, routing key, the fourteen properties in order, body).
StoredMessage = tuple[int, bool, str, str, tuple[Any, ...], bytes]


class QueueStore(Protocol):
    count: int
    bytes_on_disk: int
    # called once, by the first append of a store that has no files yet
    on_first_write: Callable[[], None] | None

    @property
    def has_files(self) -> bool:
        """The queue has a data directory (or its next write makes one)."""

    def append(
        self,
        exchange: str,
        routing_key: str,
        properties: tuple[Any, ...],
        body: bytes,
        redelivered: bool = False,
        transient: bool = False,
        expires_ms: int = 0,
    ) -> int:
        """Buffer the message for the next group commit; its sequence number (> 0). A
        ``transient`` one is only paged out: recovery does not bring it back.
        ``expires_ms``: when its TTL runs out (ms since the epoch; 0: never), kept so
        that a recovered message expires at its original deadline."""

    def remove(self, seq: int) -> None: ...

    def mark_delivered(self, seq: int) -> None: ...

    def read(self, seq: int) -> StoredMessage: ...

    def recover(self, keep: Callable[[int, int, bool, int], None]) -> int:
        """Rebuild from disk; ``keep(seq, body size, was_delivered, expires_ms)`` per live
        message, in order (``expires_ms`` 0: none stored). Bodies stay on disk until
        ``read``."""

    def destroy(self) -> None: ...


# A delayed message as the store hands it back: (slot, due time in ms since the epoch,
# routing key, the fourteen properties in order, body).
DelayedRecord = tuple[int, int, str, tuple[Any, ...], bytes]


class DelayedStore(Protocol):
    """The persistent messages an ``x-delayed-message`` exchange holds until their time.
    Writes join the same group commit as queue writes (``MessageStore.when_durable``)."""

    def add(self, due_ms: int, routing_key: str, properties: tuple[Any, ...], body: bytes) -> int:
        """Buffer a message for the next group commit; its slot (> 0)."""

    def remove(self, slot: int) -> None: ...

    def recover(self) -> list[DelayedRecord]:
        """Every message still held, read back from disk."""

    def destroy(self) -> None: ...


class FsyncHistogram(Protocol):
    bounds: tuple[float, ...]  # upper bounds in seconds; counts has one more (+Inf)
    counts: list[int]
    total: float
    count: int


class MemberRecord(Protocol):
    """What a quorum queue member's copy adds to its store (``store/member_log.py``):
    written in the group commit with the records it names."""

    def enqueued(self, slot: int, seq: int) -> None: ...

    def removed(self, slot: int) -> None: ...

    def note(self, state: dict[str, Any]) -> None: ...

    def drop(self) -> None: ...


# A member copy recovered: its store, its record, its state and the leader's
# seq -> (slot, body size, times delivered), in the copy's order.
MemberCopy = tuple[QueueStore, MemberRecord, dict[str, Any], dict[int, tuple[int, int, int]]]


class MessageStore(Protocol):
    appends: int  # grows with every buffered change: compared around a publish
    bytes_on_disk: int
    segment_count: int
    before_flush: list[Callable[[], None]]

    @property
    def fsync_stats(self) -> FsyncHistogram: ...

    def open_queue(self, vhost: str, name: str) -> QueueStore: ...

    def open_spill(self, vhost: str, name: str) -> QueueStore:
        """A scratch store for paging a queue's transient messages out (not recovered)."""

    def open_delayed(self, vhost: str, exchange: str) -> DelayedStore: ...

    def open_member(self, vhost: str, name: str) -> tuple[QueueStore, MemberRecord | None]:
        """A quorum queue member's fresh copy: its store and the record of its
        replication state (None where nothing survives a restart)."""

    def member_copies(self) -> list[tuple[str, str]]:
        """(vhost, queue) of the member copies found on disk at start."""

    def recover_member(self, vhost: str, name: str) -> MemberCopy | None:
        """A member copy kept across a restart, or None (no usable record: it goes)."""

    def drop_member(self, vhost: str, name: str) -> None:
        """A member copy kept on disk whose queue is gone: deleted."""

    def when_durable(self, waiter: Callable[[bool], None]) -> None: ...

    def changed(self) -> None:
        """Count a change a ``before_flush`` hook will write (a definition), so that
        ``appends`` moves and the next group commit runs."""


class DefinitionsStore(Protocol):
    """The definitions document: a snapshot plus a journal of changes since."""

    journal_size: int
    snapshot_size: int
    damaged: list[Any]  # files found damaged (and set aside) by ``load``

    def load(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]] | None:
        """(snapshot or None, journal records to replay in order); None on a first
        start."""

    def append(self, records: list[dict[str, Any]]) -> None:
        """Journal records, fsync'ed by the next group commit; OSError if not written."""

    def save(self, data: dict[str, Any]) -> None:
        """A new snapshot; the journal starts afresh."""

    def keep_evidence(self) -> Any:
        """Copy the files as they are now aside (the import of them failed)."""


# A stream record as the store hands it back: (offset, timestamp in ms, exchange,
# routing key, the fourteen properties in order, body). The values are fresh objects the
# caller may keep or change (the headers dict in particular).
StreamRecord = tuple[int, int, str, str, tuple[Any, ...], bytes]


class StreamCursor(Protocol):
    """One consumer's position in a stream: reads forward from an offset."""

    @property
    def offset(self) -> int:
        """The offset ``next`` returns next (or waits for, at the tail)."""

    def next(self) -> StreamRecord | None:
        """The next record, or None at the tail (call again after an append)."""

    def next_tagged(self) -> tuple[StreamRecord, str, int] | None:
        """``next`` with the record's producer name and publishing id ("", 0: none)."""

    def next_chunk(
        self, max_bytes: int, end: int | None, wire: bool = False
    ) -> tuple[int, int, int, bytes] | None:
        """Records undecoded, in the store's record format (docs/streams.md, "Chunked
        reads"): (first offset, last offset, count, bytes) of up to ``max_bytes`` (at
        least one record) before offset ``end``; None at the tail. ``count`` counts
        messages. With ``wire`` chunk records (stream-protocol chunks) come as stored,
        whole, even when ``first`` lies inside one; without, as one record a message."""

    def close(self) -> None: ...


class StreamStore(Protocol):
    """One stream's append-only log, its producers' last publishing ids and its named
    consumers' stored offsets. Appends are readable at once and durable once the group
    commit that covers them ran (the storage tells the store of each file it wrote)."""

    dropped_bytes: int  # what recovery cut off a torn tail
    producers: dict[str, int]  # last publishing id per producer name

    @property
    def first_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...

    @property
    def last_chunk_offset(self) -> int:
        """The first offset of the last chunk written (one publish's messages): where a
        consumer starting at ``last`` starts, as in RabbitMQ."""

    @property
    def first_timestamp(self) -> int | None: ...

    @property
    def last_timestamp(self) -> int: ...

    def append(
        self,
        exchange: str,
        routing_key: str,
        properties: tuple[Any, ...],
        body: bytes,
        *,
        timestamp_ms: int,
        producer: str = "",
        publishing_id: int = 0,
    ) -> int:
        """Write one message; its offset."""

    def append_batch(
        self,
        exchange: str,
        routing_key: str,
        batch: bytes,
        *,
        timestamp_ms: int,
        producer: str = "",
        first_id: int = 0,
    ) -> int:
        """Write each message of a batched publish (docs/streams.md) as its own record,
        publishing ids ``first_id`` upwards; those ``producer`` already stored are
        dropped. Returns how many were written. ValueError for a malformed batch (nothing
        written), OSError when the disk refused."""

    def append_entries(
        self,
        exchange: str,
        routing_key: str,
        entries: bytes,
        *,
        timestamp_ms: int,
        producer: str = "",
        first_id: int = 0,
    ) -> int:
        """Write a stream client's messages (``u32 length | message`` each, every message
        one AMQP 1.0 data section or not AMQP 1.0; docs/streams.md) as one chunk record,
        ids ``first_id`` upwards, less those ``producer`` already stored; how many were
        written. ValueError for malformed entries (nothing written), OSError when the
        disk refused."""

    def is_duplicate(self, producer: str, publishing_id: int) -> bool: ...

    def reader(self, offset: int) -> StreamCursor: ...

    def offset_for_time(self, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (the next one if none)."""

    def stored_offset(self, name: str) -> int | None: ...

    def store_offset(self, name: str, offset: int) -> None: ...

    def truncate(self, offset: int) -> int:
        """Remove the records at ``offset`` and after (a replica's uncommitted tail), on
        disk before it returns; the new next offset (lower if a chunk straddles it)."""

    def restart_at(self, base: int) -> None:
        """Drop every record; the log goes on, empty, at offset ``base``."""

    @property
    def committed_mark(self) -> int:
        """The offset below which a replica's records are known committed (0: none)."""

    def mark_committed(self, offset: int) -> None: ...

    def close(self) -> None: ...

    def destroy(self) -> None:
        """Close and delete the stream's files (the queue was deleted)."""


# A stream found on disk at start-up: (vhost, name, declaration arguments).
SavedStream = tuple[str, str, dict[str, Any]]


class StreamStorage(Protocol):
    def open_stream(
        self,
        vhost: str,
        name: str,
        arguments: dict[str, Any],
        *,
        max_segment_bytes: int,
        max_bytes: int,
        max_age_ms: int,
    ) -> StreamStore:
        """Create the stream's files, or reopen (and recover) them; ``arguments`` are
        kept so that ``saved_streams`` can bring the stream back."""

    def saved_streams(self) -> list[SavedStream]: ...
