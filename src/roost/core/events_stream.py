"""The broker's own traffic events, appended to a stream queue (opt-in: --events-stream).

With the setting on, every vhost gets a stream queue of that name, and the broker appends
to it what happens in that vhost: messages published, delivered, acknowledged, rejected
and dead-lettered; queues created and deleted; connections created and closed. Each event
is a JSON object with ``type`` and ``ts`` (server time, ms since the epoch, with
microseconds); docs/streams.md lists every field.

Cost and bounds:
- Off, the hooks in the core cost one ``is None`` test each (``vhost.events``,
  ``queue.events``).
- On, a hook appends a small dict to a buffer; the buffer goes to the stream as a few
  messages (a JSON array of up to ``BATCH_EVENTS`` events each) on a timer or once per
  loop iteration when it is full, so the stream sees one append per batch, not per
  event. At most ``MAX_BUFFERED`` events wait; beyond that they are counted and dropped,
  never queued without end.
- Never recursive: the events stream's own ``queue.events`` is None, so deliveries and
  acks from it, publishes to it and its creation produce no events.
- A slow reader cannot stall the broker: the stream only appends (it has no flow
  control towards its writer) and keeps ``max_bytes`` (x-max-length-bytes).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

from roost.core.events import Event, QueueDeclared, QueueDeleted, VHostChanged, VHostDeleted
from roost.core.features.timers import call_later, call_soon
from roost.core.message import Message, Properties

if TYPE_CHECKING:
    import asyncio

    from roost.core.client import Client
    from roost.core.events import Listener
    from roost.core.queues.base import Queue
    from roost.core.queues.entry import Entry
    from roost.core.vhost import VHost

log = logging.getLogger("roost.events")

FLUSH_SECONDS = 0.1  # a lone event waits at most this long for company
BATCH_EVENTS = 500  # events per stream message (about 60-100 KiB of JSON)
MAX_BUFFERED = 50_000  # waiting events at most; more are dropped (and counted)
CONTENT_TYPE = "application/json"
MESSAGE_TYPE = "roost.events"
COUNT_HEADER = "x-roost-events"  # events in this message
RUN_HEADER = "x-roost-run"  # the broker's start time (ms): queue seqs restart with it


def _now_ms() -> float:
    return time.time() * 1000.0


def _json_default(value: Any) -> Any:
    """Argument tables may hold bytes, decimals or datetimes: write them as text."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


class EventsStream:
    """One vhost's events: the buffer, and the stream queue it is written to."""

    def __init__(self, vhost: VHost, name: str, arguments: dict[str, Any], run: int) -> None:
        self.vhost = vhost
        self.name = name
        self.arguments = arguments
        self.run = str(run)
        self.stream: Queue | None = None
        self.buffer: list[dict[str, Any]] = []
        self.dropped = 0
        self.written = 0
        self.closed = False
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._warned = False

    # -- set-up ---------------------------------------------------------------------------

    def attach(self) -> None:
        """Start recording this vhost: open (or declare) the stream, hook every queue."""
        self._open_stream()
        vhost = self.vhost
        vhost.events = self
        for queue in vhost.queues.values():
            queue.events = None if queue is self.stream else self
        vhost.on_change.append(self._vhost_changed)

    def _open_stream(self) -> Queue | None:
        vhost = self.vhost
        queue = vhost.queues.get(self.name)
        if queue is None or queue.deleted:
            queue = vhost.declare_queue(self.name, durable=True, arguments=dict(self.arguments))
        if queue.kind != "stream":
            if not self._warned:
                log.warning(
                    "events: queue '%s' in vhost '%s' is not a stream; no events recorded",
                    self.name,
                    vhost.name,
                )
                self._warned = True
            self.stream = None
            return None
        queue.events = None  # never record what happens to the events stream itself
        self.stream = queue
        return queue

    def close(self) -> None:
        """The vhost is gone: drop what waits, stop listening."""
        self.closed = True
        self.buffer = []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._vhost_changed in self.vhost.on_change:
            self.vhost.on_change.remove(self._vhost_changed)
        self.vhost.events = None

    # -- buffering and writing --------------------------------------------------------------

    def _add(self, event: dict[str, Any]) -> None:
        buffer = self.buffer
        n = len(buffer)
        if n >= MAX_BUFFERED:
            self.dropped += 1
            return
        buffer.append(event)
        if n == 0:
            self._timer = call_later(FLUSH_SECONDS, self.flush)
        elif n + 1 == BATCH_EVENTS:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = call_soon(self.flush)

    def flush(self) -> None:
        """Write what is buffered as messages of up to BATCH_EVENTS events each."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        events, self.buffer = self.buffer, []
        if not events or self.closed:
            return
        stream = self.stream
        if stream is None or stream.deleted:
            stream = self._open_stream()
            if stream is None:
                self.dropped += len(events)
                return
        seconds = int(time.time())
        done = 0
        try:
            for start in range(0, len(events), BATCH_EVENTS):
                batch = events[start : start + BATCH_EVENTS]
                body = json.dumps(  # the encoding is most of an event's cost: keep it lean
                    batch,
                    separators=(",", ":"),
                    ensure_ascii=False,
                    check_circular=False,
                    default=_json_default,
                )
                props = Properties(
                    content_type=CONTENT_TYPE,
                    type=MESSAGE_TYPE,
                    timestamp=seconds,
                    headers={COUNT_HEADER: len(batch), RUN_HEADER: self.run},
                )
                stream.push(Message("", self.name, props, body.encode("utf-8", "replace")))
                done += len(batch)
        except OSError as exc:  # the disk is full: telemetry must not take the broker down
            self.dropped += len(events) - done
            log.warning("events: cannot append to stream '%s': %s", self.name, exc)
        self.written += done

    # -- hooks called by the core -------------------------------------------------------------

    def published(
        self, exchange: str, message: Message, queues: Collection[Queue]
    ) -> dict[str, int] | None:
        """Record a publish routed to ``queues`` (before they take it, so that it comes
        before its deliveries). Returns the event's ``queues`` map for the caller to fill
        in: queue name -> the message's sequence number there (a stream's offset); None
        when nothing is recorded (a publish only to the events stream itself)."""
        routed = len(queues)
        stream = self.stream
        if routed and stream is not None and stream in queues:
            routed -= 1
            if not routed:
                return None
        seqs: dict[str, int] = {}
        props = message.properties
        event: dict[str, Any] = {
            "type": "message.published",
            "ts": _now_ms(),
            "exchange": exchange,
            "routing_key": message.routing_key,
            "queues": seqs,
            "routed": routed,
            "size": len(message.body),
            "persistent": props.delivery_mode == 2,
        }
        if props.message_id is not None:
            event["message_id"] = props.message_id
        if props.timestamp is not None:
            event["timestamp"] = props.timestamp
        self._add(event)
        return seqs

    def delivered(
        self, queue: Queue, entry: Entry, consumer_tag: str | None, auto_ack: bool
    ) -> None:
        event: dict[str, Any] = {
            "type": "message.delivered",
            "ts": _now_ms(),
            "queue": queue.name,
            "seq": entry.seq,
            "size": entry.size,
            "redelivered": entry.redelivered,
            "auto_ack": auto_ack,
        }
        if consumer_tag is not None:
            event["consumer"] = consumer_tag
        self._add(event)

    def acked(self, queue: Queue, entry: Entry) -> None:
        self._add({"type": "message.acked", "ts": _now_ms(), "queue": queue.name, "seq": entry.seq})

    def rejected(self, queue: Queue, entry: Entry, requeue: bool) -> None:
        self._add(
            {
                "type": "message.rejected",
                "ts": _now_ms(),
                "queue": queue.name,
                "seq": entry.seq,
                "requeue": requeue,
            }
        )

    def dead_lettered(self, queue: Queue, message: Message, reason: str, routed: int) -> None:
        """``message`` as republished to the dead-letter exchange (``message.exchange``)."""
        event: dict[str, Any] = {
            "type": "message.dead_lettered",
            "ts": _now_ms(),
            "queue": queue.name,
            "reason": reason,
            "exchange": message.exchange,
            "routing_key": message.routing_key,
            "routed": routed,
            "size": len(message.body),
        }
        if message.properties.message_id is not None:
            event["message_id"] = message.properties.message_id
        self._add(event)

    def connection_created(self, client: Client) -> None:
        event = {
            "type": "connection.created",
            "ts": _now_ms(),
            "connection": client.name,
            "peer": client.peer,
            "user": client.user.name,
            "protocol": client.protocol,
        }
        product = client.properties.get("product")  # the client library, when it says
        if product is not None:
            event["client"] = _json_default(product)
        self._add(event)

    def connection_closed(self, client: Client, reason: str) -> None:
        traffic = client.traffic
        self._add(
            {
                "type": "connection.closed",
                "ts": _now_ms(),
                "connection": client.name,
                "peer": client.peer,
                "user": client.user.name,
                "protocol": client.protocol,
                "reason": reason,
                "recv_oct": traffic.recv_oct,
                "send_oct": traffic.send_oct,
                "duration_ms": round((time.time() - client.opened_at) * 1000.0, 3),
            }
        )

    def _vhost_changed(self, event: Event) -> None:
        if isinstance(event, QueueDeclared):
            queue = event.queue
            if queue.name == self.name:
                queue.events = None  # the events stream (re)declared: no events about it
                return
            # a new queue took vhost.events (this) when it was made: nothing to hook
            self._queue_event("queue.created", queue)
        elif isinstance(event, QueueDeleted) and event.queue is not self.stream:
            self._queue_event("queue.deleted", event.queue)

    def _queue_event(self, kind: str, queue: Queue) -> None:
        self._add(
            {
                "type": kind,
                "ts": _now_ms(),
                "queue": queue.name,
                "kind": queue.kind,
                "durable": queue.durable,
                "exclusive": queue.exclusive,
                "auto_delete": queue.auto_delete,
                "arguments": queue.arguments,
            }
        )


class Definitions(Protocol):
    """What the events streams follow of the definitions (core.catalog.Catalog)."""

    vhosts: dict[str, VHost]
    on_change: list[Listener]


class EventsStreams:
    """Every vhost's ``EventsStream``; follows vhosts as they come and go."""

    def __init__(self, definitions: Definitions, name: str, max_bytes: int) -> None:
        self.name = name
        # what the broker declares; a stream of that name that exists keeps its arguments
        self.arguments: dict[str, Any] = {
            "x-queue-type": "stream",
            "x-max-length-bytes": max_bytes,
            # retention drops whole segments: several per stream keep it near the limit
            "x-stream-max-segment-size-bytes": max(max_bytes // 8, 64 * 1024),
        }
        self.run = int(time.time() * 1000)
        self.by_vhost: dict[str, EventsStream] = {}
        for vhost in list(definitions.vhosts.values()):
            self._attach(vhost)
        definitions.on_change.append(self._broker_changed)

    def _attach(self, vhost: VHost) -> None:
        if vhost.name in self.by_vhost:
            return
        events = EventsStream(vhost, self.name, self.arguments, self.run)
        events.attach()
        self.by_vhost[vhost.name] = events

    def _broker_changed(self, event: Event) -> None:
        if isinstance(event, VHostChanged):
            self._attach(event.vhost)
        elif isinstance(event, VHostDeleted):
            events = self.by_vhost.pop(event.vhost.name, None)
            if events is not None:
                events.close()

    def flush(self) -> None:
        """Write every buffered event now (at shutdown, before the streams close)."""
        for events in self.by_vhost.values():
            events.flush()


def enable(definitions: Definitions, name: str, max_bytes: int) -> EventsStreams:
    """Record every vhost's traffic in a stream queue ``name`` of that vhost."""
    return EventsStreams(definitions, name, max_bytes)
