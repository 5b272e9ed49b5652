"""A stream-protocol subscription on the core: one core session per subscription (so a
multiple ack settles only its own deliveries), fed runs of stored records by the stream
queue (chunked deliveries, ``x-roost-chunk-bytes``), sent to the client as chunks.

Each core delivery is a run of records as the store keeps them; it waits as it came
until the subscription has credit (the client's unit of flow control is a chunk), then
``deliver_chunks.py`` turns it into one or more osiris chunks (at most
``CHUNK_MESSAGES`` messages and the connection's frame size each). Building a run only
when it can be sent keeps the first chunk's latency at one run's work, not
``PREFETCH`` runs'. Sending a delivery's last chunk
acks it: for a stream an ack only returns credit, so the core delivers the next run. A
client that gives no credit therefore holds at most ``PREFETCH`` runs of
``STORED_RUN_BYTES`` each of the broker's memory.
"""

from __future__ import annotations

import datetime
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core import BrokerError, Message
from roost.stream_protocol import constants as c
from roost.stream_protocol.amqp10 import encode_data, encode_message
from roost.stream_protocol.chunks import SimpleEntry, build_chunk
from roost.stream_protocol.codec import encode_deliver_head
from roost.stream_protocol.deliver_chunks import Built, ChunkBuilder

if TYPE_CHECKING:
    from roost.core.ports.adapter import Consumer, Session

PREFETCH = 8  # core deliveries (runs of stored records) ahead of the client's credit
STORED_RUN_BYTES = 256 * 1024  # the most bytes of stored records per core delivery
CHUNK_MESSAGES = 1000
# headers the broker keeps for itself: a stream client reads them from the chunk instead
# a message's filter value (Publish version 2; RabbitMQ's header for AMQP publishers)
FILTER_HEADER = "x-stream-filter-value"
INTERNAL_HEADERS = frozenset(
    {"x-stream-offset", "x-stream-timestamp", "x-stream-producer-name", "x-publishing-id",
     FILTER_HEADER}
)
# Roost's marker for a payload kept exactly as a stream client sent it (not AMQP 1.0)
RAW_HEADER = "x-roost-stream-raw"
# the stream queue's chunked deliveries (core/queues/stream.py, docs/streams.md)
CHUNK_ARGUMENT = "x-roost-chunk-bytes"
CHUNK_WIRE_ARGUMENT = "x-roost-chunk-wire"  # chunk records as stored (store/stream_chunk.py)
CHUNK_CONTENT_TYPE = "application/x-roost-stream-chunk"
_MAX_CHUNK_OVERHEAD = 64  # frame head, Deliver head and chunk header, with room


def payload(message: Message) -> bytes:
    """What a stream client reads for a stored message: the bytes it was published with,
    or the message as AMQP 1.0 (from AMQP 0-9-1, STOMP or an AMQP 1.0 stream client)."""
    p = message.properties
    headers = p.headers or {}
    if headers.get(RAW_HEADER) is True:
        return message.body
    if len(headers) == 2 and p.message_id is None and p.correlation_id is None and (
        p.content_type is None and p.type is None and p.reply_to is None
    ) and p.timestamp is None and p.user_id is None and p.content_encoding is None:
        return encode_data(message.body)  # only the offset and timestamp headers: the body
    props: dict[str, Any] = {}
    if p.message_id is not None:
        props["message_id"] = p.message_id
    if p.user_id is not None:
        props["user_id"] = p.user_id.encode()
    if p.type is not None:
        props["subject"] = p.type
    if p.reply_to is not None:
        props["reply_to"] = p.reply_to
    if p.correlation_id is not None:
        props["correlation_id"] = p.correlation_id
    if p.content_type is not None:
        props["content_type"] = p.content_type
    if p.content_encoding is not None:
        props["content_encoding"] = p.content_encoding
    if p.timestamp is not None:
        props["creation_time"] = datetime.datetime.fromtimestamp(p.timestamp, datetime.UTC)
    app = {k: v for k, v in headers.items() if k not in INTERNAL_HEADERS}
    return encode_message(message.body, props, app)


class Subscription:
    """One Subscribe: the core's ``DeliverySink`` for its own session."""

    def __init__(
        self,
        subscription_id: int,
        stream: str,
        credit: int,
        *,
        frame_max: int,
        write: Callable[[bytes | memoryview], None],
        wake: Callable[[Subscription], None],
        gone: Callable[[Subscription], None],
        fail: Callable[[BrokerError], None],
        filter_values: frozenset[str] | None = None,
        match_unfiltered: bool = False,
    ) -> None:
        self.id = subscription_id
        self.stream = stream
        self.credit = credit
        self.session: Session | None = None
        self.consumer: Consumer | None = None
        self.active = True  # single active consumer: False while another one reads
        self.spec: Any = None  # the Subscribe's offset specification
        # offset specification ``last``: RabbitMQ starts at the last chunk, so the first
        # run's chunk record goes whole although the core starts at its last message
        self.whole_first_chunk = False
        self.group: tuple[str, str, str] | None = None  # (vhost, stream, name) when single
        # core deliveries not yet built: (run of stored records, delivery tag, the first
        # offset to send: a run may start inside a chunk record)
        self._runs: deque[tuple[bytes, int, int]] = deque()
        # built: (a Deliver frame, the core delivery tag its sending acks or 0)
        self._frames: deque[tuple[Built, int]] = deque()
        chunk_bytes = max(frame_max - _MAX_CHUNK_OVERHEAD, 1024) if frame_max else 1 << 20
        self._builder = ChunkBuilder(
            chunk_bytes, CHUNK_MESSAGES, full=payload, raw_header=RAW_HEADER,
            internal=INTERNAL_HEADERS, only=filter_values, unfiltered=match_unfiltered,
            filter_header=FILTER_HEADER,
        )
        self._write = write
        self._wake = wake
        self._gone = gone
        self._fail = fail

    def core_arguments(self) -> dict[str, Any]:
        """The core consumer's arguments beyond the offset: chunked deliveries."""
        return {CHUNK_ARGUMENT: STORED_RUN_BYTES, CHUNK_WIRE_ARGUMENT: True}

    # -- DeliverySink -------------------------------------------------------------------

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        was_empty = not self.pending
        if message.properties.content_type == CHUNK_CONTENT_TYPE:
            first = (message.properties.headers or {}).get("x-stream-offset", 0)
            if self.whole_first_chunk:
                self.whole_first_chunk = False
                first = 0
            self._runs.append((message.body, delivery_tag, first))
        else:  # one message (a stream queue always chunks for us; kept for safety)
            headers = message.properties.headers or {}
            chunk = build_chunk(
                [SimpleEntry(payload(message))],
                chunk_id=headers.get("x-stream-offset", 0),
                timestamp=headers.get("x-stream-timestamp", 0),
            )
            self._frames.append((encode_deliver_head(self.id, len(chunk)) + chunk, delivery_tag))
        if was_empty:
            self._wake(self)

    @property
    def pending(self) -> bool:
        """Whether deliveries wait for the client's credit."""
        return bool(self._runs or self._frames)

    def consumer_cancelled(self, consumer_tag: str) -> None:
        self._gone(self)

    def close_with(self, error: BrokerError) -> None:
        self._fail(error)

    # -- to the client ------------------------------------------------------------------

    def flush(self) -> None:
        """Send what credit allows, one chunk per credit, acking each delivery whose last
        chunk went out."""
        frames, runs = self._frames, self._runs
        while self.active and self.session is not None:
            if not frames:
                if not runs or self.credit <= 0:
                    break
                data, tag, first = runs.popleft()
                built = self._builder.build(data, self.id, first)
                frames.extend((frame, 0) for frame in built[:-1])
                # b"": a run whose every message the subscription's filter left out
                frames.append((built[-1] if built else b"", tag))
            frame, tag = frames[0]
            if frame:
                if self.credit <= 0:
                    break
                if isinstance(frame, tuple):  # a stored chunk: its head, then the chunk
                    self._write(frame[0])
                    self._write(frame[1])
                else:
                    self._write(frame)
                self.credit -= 1
            frames.popleft()
            if tag:
                self.session.ack(tag, False)  # may deliver another run at once

    def drop_pending(self) -> None:
        self._runs.clear()
        self._frames.clear()


def offset_arguments(spec_type: int, value: int | None) -> dict[str, Any]:
    """The core's stream consumer arguments for a Subscribe's offset specification."""
    if spec_type == c.OFFSET_FIRST:
        return {"x-stream-offset": "first"}
    if spec_type == c.OFFSET_LAST:
        return {"x-stream-offset": "last"}
    if spec_type == c.OFFSET_OFFSET:
        return {"x-stream-offset": max(value or 0, 0)}
    if spec_type == c.OFFSET_TIMESTAMP:
        return {"x-roost-start-timestamp-ms": max(value or 0, 0)}
    return {"x-stream-offset": "next"}
