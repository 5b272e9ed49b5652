"""The stream queue: an append-only, replayable log; consumption removes nothing.

Each consumer reads from its own cursor. Acks only return credit (and, for a consumer
named by ``x-stream-consumer-name``, move its stored offset: see stream_progress.py);
nack and reject return credit too and never redeliver: re-subscribe with an offset to
read again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from roost.core.errors import PreconditionFailed
from roost.core.message import Message, Properties, header_text
from roost.core.queues.base import Queue
from roost.core.queues.entry import Entry
from roost.core.queues.stream_args import int_arg, parse_max_age, start_from
from roost.core.queues.stream_delivery import (
    CHUNK_ARGUMENT,
    CHUNK_WIRE_ARGUMENT,
    MAX_CHUNK_BYTES,
    Cursor,
    StreamEntry,
    feed,
)

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.consumer import Consumer
    from roost.core.vhost import VHost

log = logging.getLogger("roost.stream")

PRODUCER_HEADER = "x-stream-producer-name"
PUBLISHING_ID_HEADER = "x-publishing-id"
# Roost's extension: a publish carrying many messages for the stream (docs/streams.md)
BATCH_CONTENT_TYPE = "application/x-roost-stream-batch"
# ... and the stream protocol's: a Publish frame's messages, stored as one chunk record
ENTRIES_CONTENT_TYPE = "application/x-roost-stream-entries"
# the offset query's producers table is capped at this many encoded bytes (see take)
PRODUCERS_TABLE_BYTES = 2048

class StreamReplication(Protocol):
    """A cluster's replication of one stream, led here (roost.cluster.quorum.stream_*):
    told of every append; ``refusal`` non-empty while it takes no publishes;
    ``keeps_copy``: deleting the queue closes the log and leaves the files to it."""

    refusal: str
    keeps_copy: bool

    def appended(self) -> None: ...
    def offset_stored(self, name: str, offset: int) -> None: ...
    def close(self, why: str = ...) -> None: ...


def recent_producers(producers: dict[str, int]) -> dict[str, int]:
    """The most recently active producers (``producers`` is kept in that order) whose
    table entries fit PRODUCERS_TABLE_BYTES: a content header must fit in one frame, and
    AMQP lets a client negotiate frames as small as 4096 bytes."""
    out: dict[str, int] = {}
    room = PRODUCERS_TABLE_BYTES
    for name in reversed(producers):
        size = len(name.encode("utf-8"))
        if size > 255:
            continue  # longer than a table key (shortstr) may be
        room -= size + 10  # key length, key, type tag, 64-bit value
        if room < 0:
            break
        out[name] = producers[name]
    return out


class StreamQueue(Queue):
    kind = "stream"

    def __init__(
        self,
        vhost: VHost,
        name: str,
        *,
        durable: bool = False,
        exclusive_owner: Client | None = None,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        # RabbitMQ's wording (rabbit_queue_type_util): streams are durable and shared
        where = f"queue '{name}' in vhost '{vhost.name}'"
        if not durable:
            raise PreconditionFailed(f"invalid property 'non-durable' for {where}")
        if exclusive_owner is not None:
            raise PreconditionFailed(f"invalid property 'exclusive-owner' for {where}")
        if auto_delete:
            raise PreconditionFailed(f"invalid property 'auto-delete' for {where}")
        arguments = arguments or {}
        max_segment = int_arg(arguments, "x-stream-max-segment-size-bytes")
        max_bytes = int_arg(arguments, "x-max-length-bytes")
        max_age = parse_max_age(arguments.get("x-max-age"))
        super().__init__(vhost, name, durable=True, arguments=arguments)
        self.streams = vhost.streams
        self.log = self.streams.open_store(
            vhost.name,
            name,
            arguments,
            max_segment_bytes=max_segment,
            max_bytes=max_bytes,
            max_age_ms=max_age,
        )
        if self.log.dropped_bytes:
            log.warning(
                "stream %r: dropped a torn tail of %d bytes on recovery",
                name,
                self.log.dropped_bytes,
            )
        self._cursors: dict[Consumer, Cursor] = {}
        self._dispatching = False
        self.stat_deduplicated = 0
        self.streams.open.add(self)
        # a cluster's replicated stream led here: consumers read below ``committed``
        # (None: everything stored), the offset below which a majority holds the log
        self.replication: StreamReplication | None = None
        self.committed: int | None = None
        self.group: Any = None  # leader / members / online for management

    # -- incoming -----------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        end = self.log.next_offset if self.committed is None else self.committed
        return max(0, end - self.log.first_offset)

    @property
    def last_seq(self) -> int:
        """The offset of the last message appended (-1 when none)."""
        return self.log.next_offset - 1

    def push(self, message: Message) -> bool:
        if self.replication is not None and self.replication.refusal:
            return self._refuse(self.replication.refusal)
        content_type = message.properties.content_type
        if content_type in (BATCH_CONTENT_TYPE, ENTRIES_CONTENT_TYPE):
            return self._push_batch(message)
        producer = ""
        publishing_id = 0
        headers = message.properties.headers
        if headers and PUBLISHING_ID_HEADER in headers:
            producer = header_text(headers.get(PRODUCER_HEADER))
            raw_id = headers[PUBLISHING_ID_HEADER]
            if producer and isinstance(raw_id, int) and not isinstance(raw_id, bool):
                if self.log.is_duplicate(producer, raw_id):
                    self.stat_deduplicated += 1
                    self._duplicate()
                    return True  # dropped, yet the publisher's confirm is positive
                publishing_id = raw_id
            else:
                producer = ""
        try:
            self.log.append(
                message.exchange,
                message.routing_key,
                message.properties.as_tuple(),
                message.body,
                timestamp_ms=time.time_ns() // 1_000_000,
                producer=producer,
                publishing_id=publishing_id,
            )
        except OSError as exc:  # a full disk: the store kept nothing of it; a nack says so
            return self._refuse(f"could not store the message: {exc.strerror}")
        self._stored(1)
        return True

    def _push_batch(self, message: Message) -> bool:
        """A batched publish: each message in its body becomes its own record (ids from
        the batch's ``x-publishing-id`` upwards), all or none; malformed is refused."""
        headers = message.properties.headers or {}
        producer = header_text(headers.get(PRODUCER_HEADER))
        first_id = headers.get(PUBLISHING_ID_HEADER)
        if not producer or not isinstance(first_id, int) or isinstance(first_id, bool):
            producer, first_id = "", 0
        append = (
            self.log.append_entries
            if message.properties.content_type == ENTRIES_CONTENT_TYPE
            else self.log.append_batch
        )
        try:
            written = append(
                message.exchange,
                message.routing_key,
                message.body,
                timestamp_ms=time.time_ns() // 1_000_000,
                producer=producer,
                first_id=first_id,
            )
        except ValueError as exc:
            return self._refuse(f"refused a malformed batch: {exc}")
        except OSError as exc:
            return self._refuse(f"could not store the batch: {exc.strerror}")
        if written:
            self._stored(written)
        elif producer:
            self._duplicate()  # every message of the batch a duplicate
        return True

    def _duplicate(self) -> None:
        """A replicated stream's dropped duplicate is confirmed only once the record it
        repeats is committed: the publisher retried it because that one had no confirm
        yet (it may be inherited from an old leader, or still short of a majority), and
        a confirm promises it survives. Waits for everything appended so far."""
        replication, committed = self.replication, self.committed
        if replication is not None and committed is not None and committed < self.log.next_offset:
            replication.appended()

    def _stored(self, count: int) -> None:
        self.stat_published += count
        if self.replication is not None:
            self.replication.appended()
        if self.consumers:
            self.dispatch()

    def _refuse(self, why: str) -> bool:
        """False for push, with the reason the publisher's nack stands for (and the log)."""
        self.refusal = f"{self._where()} {why}"
        log.warning("%s", self.refusal)
        return False

    def last_publishing_id(self, producer: str) -> int | None:
        """The last id stored for ``producer`` (None: it never published with one); the
        amq.roost.producers query answers with it."""
        return self.log.producers.get(producer)

    def stored_offset(self, name: str) -> int | None:
        return self.log.stored_offset(name)

    # -- outgoing -----------------------------------------------------------------------

    def dispatch(self) -> None:
        if self._dispatching:
            return
        self._dispatching = True
        try:
            for consumer in list(self.consumers):
                cursor = self._cursors.get(consumer)
                if cursor is not None:
                    feed(self, consumer, cursor)
        finally:
            self._dispatching = False

    def take(self) -> Entry | None:
        """basic.get on a stream answers the offset query in one round trip: an empty
        message whose headers give the first and next offsets and the producers' ids."""
        lg = self.log
        headers: dict[str, Any] = {
            "x-stream-first-offset": lg.first_offset,
            "x-stream-next-offset": lg.next_offset if self.committed is None else self.committed,
            "x-stream-first-timestamp": lg.first_timestamp or 0,
            "x-stream-last-timestamp": lg.last_timestamp,
            "x-stream-producers": recent_producers(lg.producers),
            "x-stream-producer-count": len(lg.producers),
        }
        self.unacked += 1
        message = Message("", self.name, Properties(headers=headers), b"")
        return StreamEntry(lg.next_offset, message, None)

    # -- settlement ---------------------------------------------------------------------

    def settle(self, entry: Entry) -> None:
        self.unacked -= 1
        self.stat_acked += 1
        self._processed(entry)

    def _processed(self, entry: Entry) -> None:
        progress = entry.progress if isinstance(entry, StreamEntry) else None
        if progress is not None:
            upto = progress.settled(entry.seq)
            if upto is not None:
                self.store_offset(progress.name, upto)

    def store_offset(self, name: str, offset: int) -> None:
        """Remember the last offset a named consumer has processed (acks only move it on)."""
        if self.deleted:
            return  # acks arriving after the stream was deleted
        previous = self.log.stored_offset(name)
        if previous is None or offset > previous:
            try:
                self.log.store_offset(name, offset)
            except OSError as exc:  # a full disk: the old offset stays; a later ack retries
                log.warning("%s: offset of '%s' not stored: %s", self._where(), name, exc)
                return
            if self.replication is not None:
                self.replication.offset_stored(name, offset)

    def commit_offset(self, name: str, offset: int) -> None:
        """An explicit commit: set the stored offset, also backwards (a rewind)."""
        if self.deleted:
            return
        self.log.store_offset(name, offset)
        if self.replication is not None:
            self.replication.offset_stored(name, offset)

    def discard(self, entry: Entry) -> None:
        """nack/reject without requeue: the consumer is done with it, as with an ack."""
        self.unacked -= 1
        self._processed(entry)

    def requeue(self, entries: Iterable[Entry]) -> None:
        """Streams never redeliver: a requeue only returns the credit, and a named
        consumer's stored offset stays before the first such delivery."""
        count = 0
        for entry in entries:
            count += 1
            if isinstance(entry, StreamEntry) and entry.progress is not None:
                entry.progress.given_back()
        self.unacked -= count
        if not self.deleted:
            self.dispatch()

    def purge(self) -> int:
        if not self.deleted:
            raise PreconditionFailed(
                f"purge not supported by stream queue '{self.name}' in vhost '{self.vhost.name}'"
            )
        count = self.message_count
        self.close()
        if self.replication is None or not self.replication.keeps_copy:
            self.log.destroy()
        return count

    def close(self) -> None:
        for cursor in self._cursors.values():
            cursor.reader.close()
        self._cursors.clear()
        self.log.close()
        self.streams.open.discard(self)

    # -- consumers ----------------------------------------------------------------------

    def start_offset(self, kind: str, value: int | None, name: str) -> int:
        lg = self.log
        if kind == "first":
            return lg.first_offset
        if kind == "last":  # the last chunk's first message, as RabbitMQ starts it
            return max(min(lg.last_chunk_offset, lg.next_offset - 1), lg.first_offset)
        if kind == "offset":
            return value or 0
        if kind == "timestamp":
            return lg.offset_for_time(value or 0)
        if kind == "stored":
            if not name:
                raise PreconditionFailed(
                    "x-stream-offset 'stored' needs the consumer argument x-stream-consumer-name"
                )
            stored = self.log.stored_offset(name)
            return lg.first_offset if stored is None else stored + 1
        return lg.next_offset

    def add_consumer(self, consumer: Consumer) -> None:
        where = f"stream queue '{self.name}' in vhost '{self.vhost.name}'"
        if consumer.no_ack:
            raise PreconditionFailed(f"consuming from {where} requires manual acknowledgements")
        if not (consumer.prefetch or consumer.session.global_prefetch):
            raise PreconditionFailed(f"consumer prefetch count is not set for {where}")
        args = consumer.arguments
        name = header_text(args.get("x-stream-consumer-name"))
        kind, value = start_from(args)
        end = args.get("x-stream-end-offset")
        if end is not None and (isinstance(end, bool) or not isinstance(end, int)):
            raise PreconditionFailed(f"invalid x-stream-end-offset '{end}'")
        chunk = args.get(CHUNK_ARGUMENT, 0)
        if isinstance(chunk, bool) or not isinstance(chunk, int) or not (
            0 <= chunk <= MAX_CHUNK_BYTES
        ):
            raise PreconditionFailed(
                f"invalid {CHUNK_ARGUMENT} '{chunk}': an integer from 0 to {MAX_CHUNK_BYTES}"
            )
        start = self.start_offset(kind, value, name)
        super().add_consumer(consumer)
        wire = args.get(CHUNK_WIRE_ARGUMENT) is True
        self._cursors[consumer] = Cursor(self.log.reader(start), name, end, chunk, wire)

    def max_offset_lag(self) -> int:
        """How far the furthest-behind consumer is from the end of the log (0 without
        consumers): RabbitMQ's stream_consumer_max_offset_lag."""
        end = self.log.next_offset
        return max((end - c.reader.offset for c in self._cursors.values()), default=0)

    def remove_consumer(self, consumer: Consumer) -> None:
        cursor = self._cursors.pop(consumer, None)
        if cursor is not None:
            cursor.reader.close()
        super().remove_consumer(consumer)

    def __repr__(self) -> str:
        return f"<StreamQueue {self.name!r} vhost={self.vhost.name!r} next={self.log.next_offset}>"
