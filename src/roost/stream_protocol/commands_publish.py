"""The stream protocol's publishing commands: DeclarePublisher, Publish (a frame as
one batched core publish where it can be, ``publish_batch.py``; else message by
message, sub-batches deduplicated whole), QueryPublisherSequence, DeletePublisher."""

from __future__ import annotations

import contextlib

from roost.core import (
    EMPTY_PROPERTIES,
    BrokerError,
    Message,
)
from roost.stream_protocol import constants as c
from roost.stream_protocol import publish_batch
from roost.stream_protocol.commands_base import (
    UNCONFIRMED,
    CommandsBase,
    code_for,
)
from roost.stream_protocol.consumers import CHUNK_MESSAGES
from roost.stream_protocol.frames import (
    DeclarePublisher,
    DeletePublisher,
    MetadataUpdate,
    Publish,
    PublishedBatch,
    PublishedMessage,
    PublishError,
    QueryPublisherSequence,
    QueryPublisherSequenceResponse,
)
from roost.stream_protocol.leader_queries import ask_sequence
from roost.stream_protocol.publishers import Publisher, to_message

# Publish frames of one publisher read in one turn of the loop, ids following on, are
# published together (one chunk record), as RabbitMQ's osiris writer makes one chunk of
# what waits in its mailbox: subscribers get fewer, bigger Deliver frames. Bounded so a
# merged chunk still goes out whole: at most a Deliver's messages, and half of the 1 MiB
# frame size clients ask for by default.
MERGE_MESSAGES = CHUNK_MESSAGES
MERGE_BYTES = 512 * 1024


class PublishCommands(CommandsBase):
    # -- publishing -----------------------------------------------------------------------

    def _declare_publisher(self, f: DeclarePublisher) -> None:
        code = c.OK
        if f.publisher_id in self.publishers or len(self.publishers) >= 256:
            code = c.PRECONDITION_FAILED
        elif not self.port.is_stream(self.client, f.stream):
            code = c.STREAM_DOES_NOT_EXIST
        else:
            try:
                probe = Message("", f.stream, EMPTY_PROPERTIES, b"")
                self.port.check_publish(self.client, "", probe)
            except BrokerError as exc:
                code = code_for(exc)
        if code == c.OK:
            self.publishers[f.publisher_id] = Publisher(f.publisher_id, f.reference, f.stream)
            if f.stream not in self._watching:
                self._watching[f.stream] = self.port.watch_stream(
                    self.client, f.stream, lambda: self._leader_moved(f.stream)
                )
        self._reply(c.DECLARE_PUBLISHER, f.correlation_id, code)

    def _leader_moved(self, stream: str) -> None:
        """A cluster's replicated stream is led by another node now: as RabbitMQ does,
        its publishers here are dropped and the client told with a MetadataUpdate, so it
        asks Metadata and declares them again on the new leader's node."""
        self._watching.pop(stream, None)
        if self.s.closed:
            return
        self.flush_publishes()
        dropped = [p.id for p in self.publishers.values() if p.stream == stream]
        for pid in dropped:
            del self.publishers[pid]
        if dropped:  # none left (DeletePublisher): nothing to tell
            self.s.send(MetadataUpdate(c.STREAM_NOT_AVAILABLE, stream))

    def _publish(self, f: Publish) -> None:
        publisher = self.publishers.get(f.publisher_id)
        if publisher is None or not self.port.is_stream(self.client, publisher.stream):
            code = c.PUBLISHER_DOES_NOT_EXIST if publisher is None else c.STREAM_DOES_NOT_EXIST
            self.s.send(PublishError(f.publisher_id, [(m.publishing_id, code) for m in f.messages]))
            return
        if f.entries is not None:
            self._gather_entries(publisher, f)
            self.s.gate.published()
            if self._unconfirmed > self.s.settings.max_unconfirmed:
                self.s.gate.pause_for(UNCONFIRMED)
            return
        simple = publish_batch.batchable(f.messages, publisher.reference)
        if simple is not None:
            self._gather(publisher, simple)
        else:
            self.flush_publishes()
            self._publish_each(publisher, f.messages)
        self.s.gate.published()  # a resource alarm in effect blocks us now
        if self._unconfirmed > self.s.settings.max_unconfirmed:
            self.s.gate.pause_for(UNCONFIRMED)

    def _gather(self, publisher: Publisher, messages: list[PublishedMessage]) -> None:
        """Add a frame's messages to the ones gathered this turn (``MERGE_MESSAGES``);
        what cannot join them (another publisher, ids not following on, over the bounds)
        publishes those first."""
        if self._pending_entries:
            self.flush_publishes()
        size = sum(len(m.data) for m in messages)
        pending = self._pending
        if pending and not (
            publisher is self._pending_publisher
            and len(pending) + len(messages) <= MERGE_MESSAGES
            and self._pending_bytes + size <= MERGE_BYTES
            and (not publisher.reference
                 or messages[0].publishing_id == pending[-1].publishing_id + 1)
        ):
            self.flush_publishes()
            pending = self._pending
        pending.extend(messages)
        self._pending_publisher = publisher
        self._pending_bytes += size

    def _gather_entries(self, publisher: Publisher, f: Publish) -> None:
        """``_gather`` for a frame decoded as its entries (``Publish.entries``): no
        object per message on the way to the store's chunk record."""
        assert f.entries is not None
        if self._pending or (self._pending_entries and not (
            publisher is self._pending_publisher
            and self._pending_count + f.count <= MERGE_MESSAGES
            and self._pending_bytes + len(f.entries) <= MERGE_BYTES
            and (not publisher.reference or f.first_id == self._pending_ids[-1].stop)
        )):
            self.flush_publishes()
        self._pending_entries.append(f.entries)
        self._pending_ids.append(range(f.first_id, f.first_id + f.count))
        self._pending_count += f.count
        self._pending_publisher = publisher
        self._pending_bytes += len(f.entries)

    def flush_publishes(self) -> None:
        """Publish the messages gathered this turn: at its end, and before any frame
        other than a Publish is handled (a connection's operations keep their order)."""
        if self._pending_entries:
            self._flush_entries()
        if not self._pending:
            return
        publisher, messages = self._pending_publisher, self._pending
        self._pending, self._pending_bytes, self._pending_publisher = [], 0, None
        assert publisher is not None
        self._publish_frame(publisher, messages)
        if self._unconfirmed > self.s.settings.max_unconfirmed:
            self.s.gate.pause_for(UNCONFIRMED)

    def _flush_entries(self) -> None:
        publisher, parts, ranges = (
            self._pending_publisher, self._pending_entries, self._pending_ids)
        self._pending_entries, self._pending_ids = [], []
        self._pending_count = self._pending_bytes = 0
        self._pending_publisher = None
        assert publisher is not None
        message = publish_batch.entries_publish(
            publisher.stream, b"".join(parts) if len(parts) > 1 else parts[0],
            ranges[0].start, publisher.reference)
        ids = list(ranges[0]) if len(ranges) == 1 else [i for r in ranges for i in r]
        self._send_batch(publisher.id, message, ids)
        if self._unconfirmed > self.s.settings.max_unconfirmed:
            self.s.gate.pause_for(UNCONFIRMED)

    def _publish_frame(self, publisher: Publisher, messages: list[PublishedMessage]) -> None:
        """The whole frame as one core publish (publish_batch.py), one confirm for all."""
        ids = [m.publishing_id for m in messages]
        message = publish_batch.batch_message(publisher.stream, messages, publisher.reference)
        self._send_batch(publisher.id, message, ids)

    def _send_batch(self, pid: int, message: Message, ids: list[int]) -> None:
        self._unconfirmed += len(ids)
        try:
            self.port.publish(
                self.client,
                "",
                message,
                lambda ok: self._confirmed_all(pid, ids, ok),
                self._held_publisher,
            )
        except BrokerError as exc:
            self._confirmed_all(pid, ids, False, code_for(exc))

    def _confirmed_all(self, pid: int, ids: list[int], ok: bool, code: int = 0) -> None:
        self._unconfirmed -= len(ids)
        if ok:
            self._confirms.setdefault(pid, []).extend(ids)
        else:
            code = code or c.INTERNAL_ERROR
            self._errors.setdefault(pid, []).extend((i, code) for i in ids)
        self._schedule()

    def _publish_each(
        self, publisher: Publisher, messages: list[PublishedMessage | PublishedBatch]
    ) -> None:
        for m in messages:
            if isinstance(m, PublishedBatch):
                self._publish_batch(publisher, m)
            else:
                self._publish_one(
                    publisher, m.publishing_id, m.data, publisher.reference, m.filter_value
                )

    def _publish_one(
        self,
        publisher: Publisher,
        publishing_id: int,
        data: bytes,
        reference: str,
        filter_value: str | None = None,
    ) -> None:
        message = to_message(publisher.stream, data, reference, publishing_id, filter_value)
        pid = publisher.id
        self._unconfirmed += 1
        try:
            self.port.publish(
                self.client,
                "",
                message,
                lambda ok: self._confirmed(pid, publishing_id, ok),
                self._held_publisher,
            )
        except BrokerError as exc:
            self._confirmed(pid, publishing_id, False, code_for(exc))

    def _publish_batch(self, publisher: Publisher, m: PublishedBatch) -> None:
        """A sub-batch has one publishing id for all its records: deduplicated as a whole
        (checked first), the id stored with its last record."""
        try:
            records = m.entry.records()
        except Exception:  # an unsupported or corrupt compression: refuse this batch only
            self._unconfirmed += 1
            self._confirmed(publisher.id, m.publishing_id, False, c.PRECONDITION_FAILED)
            return
        if publisher.reference:
            last = self.port.stream_sequence(self.client, publisher.stream, publisher.reference)
            if last is not None and m.publishing_id <= last:
                self._unconfirmed += 1
                self._confirmed(publisher.id, m.publishing_id, True)
                return
        for i, record in enumerate(records):
            final = i == len(records) - 1
            message = to_message(
                publisher.stream,
                record,
                publisher.reference if final else "",
                m.publishing_id,
            )
            if not final:
                with contextlib.suppress(BrokerError):  # the last record's publish reports it
                    self.port.publish(self.client, "", message, None, self._held_publisher)
            else:
                self._publish_one(publisher, m.publishing_id, record, publisher.reference)

    def _confirmed(self, pid: int, publishing_id: int, ok: bool, code: int = 0) -> None:
        self._unconfirmed -= 1
        if ok:
            self._confirms.setdefault(pid, []).append(publishing_id)
        else:
            self._errors.setdefault(pid, []).append((publishing_id, code or c.INTERNAL_ERROR))
        self._schedule()

    def _query_publisher_sequence(self, f: QueryPublisherSequence) -> None:
        if ask_sequence(self, f):  # no copy here: its leader answers
            return
        try:
            last = self.port.stream_sequence(self.client, f.stream, f.reference)
        except BrokerError as exc:
            self.s.send(QueryPublisherSequenceResponse(f.correlation_id, code_for(exc), 0))
            return
        self.s.send(QueryPublisherSequenceResponse(f.correlation_id, c.OK, last or 0))

    def _delete_publisher(self, f: DeletePublisher) -> None:
        found = self.publishers.pop(f.publisher_id, None)
        code = c.OK if found is not None else c.PUBLISHER_DOES_NOT_EXIST
        self._reply(c.DELETE_PUBLISHER, f.correlation_id, code)

