"""A stream consumer's side: its cursor, the entries it is given, and the feeding of its
deliveries from the log, one per message or one per chunk of records (Roost's
``x-roost-chunk-bytes`` extension, docs/streams.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from roost.core.durability import StreamCursor, StreamRecord
from roost.core.message import Message, Properties
from roost.core.queues.entry import Entry
from roost.core.queues.stream_progress import Progress

if TYPE_CHECKING:
    from roost.core.consumer import Consumer
    from roost.core.queues.stream import StreamQueue

# Roost's extension: a consumer argument asking for chunked deliveries (docs/streams.md)
CHUNK_ARGUMENT: Final = "x-roost-chunk-bytes"
CHUNK_CONTENT_TYPE: Final = "application/x-roost-stream-chunk"
# a chunked consumer taking chunk records as stored (the stream protocol's Deliver)
CHUNK_WIRE_ARGUMENT: Final = "x-roost-chunk-wire"
MAX_CHUNK_BYTES: Final = 4 * 1024 * 1024


class StreamEntry(Entry):
    """A delivery's entry; ``seq`` is the stream offset (a chunk's last one), ``progress``
    the named consumer's subscription it counts for (None: nothing to store)."""

    __slots__ = ("progress",)

    def __init__(self, offset: int, message: Message, progress: Progress | None) -> None:
        super().__init__(offset, message)
        self.progress = progress
        if progress is not None:
            progress.delivered(offset)


class Cursor:
    __slots__ = ("chunk_bytes", "end", "progress", "reader", "wire")

    def __init__(
        self,
        reader: StreamCursor,
        name: str,
        end: int | None,
        chunk_bytes: int = 0,
        wire: bool = False,
    ) -> None:
        self.reader = reader
        self.progress = Progress(name) if name else None
        self.end = end
        self.chunk_bytes = chunk_bytes  # 0: one delivery per message
        self.wire = wire  # chunk records as stored (StreamCursor.next_chunk)


def for_delivery(record: StreamRecord) -> Message:
    """The stored message plus headers ``x-stream-offset`` and ``x-stream-timestamp``
    (the record's values are fresh: its headers dict is ours to extend)."""
    offset, timestamp, exchange, routing_key, values, body = record
    headers = values[2]
    if headers is None:
        headers = {}
        values = (*values[:2], headers, *values[3:])
    headers["x-stream-offset"] = offset
    headers["x-stream-timestamp"] = timestamp
    return Message(exchange, routing_key, Properties(*values), body)


def feed(queue: StreamQueue, consumer: Consumer, cursor: Cursor) -> None:
    """Deliver from ``cursor`` while ``consumer`` has credit (stream.py's dispatch)."""
    reader = cursor.reader
    end = cursor.end
    if end is not None and reader.offset >= end:
        finish(queue, consumer)
        return
    if cursor.chunk_bytes:
        feed_chunks(queue, consumer, cursor)
        return
    session = consumer.session
    while consumer.has_credit():
        if queue.committed is not None and reader.offset >= queue.committed:
            return  # not on a majority yet: the replication dispatches again
        record = reader.next()
        if record is None:
            return  # caught up: wait for the next push
        offset = record[0]
        if end is not None and offset >= end:
            finish(queue, consumer)
            return
        queue.unacked += 1
        queue.stat_delivered += 1
        session.deliver(
            consumer, queue, StreamEntry(offset, for_delivery(record), cursor.progress)
        )
        if end is not None and offset + 1 >= end:
            finish(queue, consumer)
            return

def feed_chunks(queue: StreamQueue, consumer: Consumer, cursor: Cursor) -> None:
    """One delivery per chunk of records (undecoded, as stored); acking it acks its
    last offset. The broker's work is per chunk, not per message."""
    reader, end, session = cursor.reader, cursor.end, consumer.session
    limit = end
    if queue.committed is not None:
        limit = queue.committed if end is None else min(end, queue.committed)
    while consumer.has_credit():
        chunk = reader.next_chunk(cursor.chunk_bytes, limit, cursor.wire)
        if chunk is None:
            if end is not None and reader.offset >= end:
                finish(queue, consumer)
            return  # caught up: wait for the next push
        first, last, count, data = chunk
        headers: dict[str, Any] = {"x-stream-offset": first, "x-stream-chunk-records": count}
        message = Message(
            "", queue.name, Properties(content_type=CHUNK_CONTENT_TYPE, headers=headers), data
        )
        queue.unacked += 1
        queue.stat_delivered += count
        session.deliver(consumer, queue, StreamEntry(last, message, cursor.progress))
        if end is not None and last + 1 >= end:
            finish(queue, consumer)
            return

def finish(queue: StreamQueue, consumer: Consumer) -> None:
    """x-stream-end-offset reached: cancel the consumer and tell the client."""
    queue.remove_consumer(consumer)
    consumer.session.consumer_gone(consumer)
