"""The stream protocol's commands once a connection is open: streams (Create, Delete,
Metadata, StreamStats), super streams (CreateSuperStream, DeleteSuperStream, Route,
Partitions), publishing (DeclarePublisher, Publish, QueryPublisherSequence,
DeletePublisher) and consuming (Subscribe, Credit, Unsubscribe, StoreOffset,
QueryOffset), each a call on the adapter port; a core error becomes the response code
RabbitMQ answers with (``code_for``).

Publishing: each message becomes a Roost message on the stream (AMQP 1.0 sections
mapped to properties and headers, ``publishers.py``) published through the port with a
confirm; the confirms of one turn of the loop go out as one PublishConfirm per
publisher. A publisher with a reference gets the stream's deduplication (headers
``x-stream-producer-name`` and ``x-publishing-id``, as Roost's AMQP producers send them).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core import (
    EMPTY_PROPERTIES,
    AccessRefused,
    BrokerError,
    Message,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)
from roost.stream_protocol import constants as c
from roost.stream_protocol import publish_batch, single_active
from roost.stream_protocol.consumers import PREFETCH, Subscription, offset_arguments
from roost.stream_protocol.frames import (
    Broker,
    ConsumerUpdate,
    ConsumerUpdateResponse,
    Create,
    CreateSuperStream,
    Credit,
    CreditResponse,
    DeclarePublisher,
    Delete,
    DeletePublisher,
    DeleteSuperStream,
    Frame,
    Metadata,
    MetadataResponse,
    MetadataUpdate,
    OffsetSpec,
    Partitions,
    PartitionsResponse,
    Publish,
    PublishConfirm,
    PublishedBatch,
    PublishedMessage,
    PublishError,
    QueryOffset,
    QueryOffsetResponse,
    QueryPublisherSequence,
    QueryPublisherSequenceResponse,
    ResolveOffsetSpec,
    ResolveOffsetSpecResponse,
    Response,
    Route,
    RouteResponse,
    StoreOffset,
    StreamMetadata,
    StreamStats,
    StreamStatsResponse,
    Subscribe,
    Unsubscribe,
)
from roost.stream_protocol.publishers import Publisher, to_message

# a reason for the gate to stay shut: more than max_unconfirmed publishes await confirms
UNCONFIRMED = "unconfirmed"

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client
    from roost.stream_protocol.session import StreamSession

log = logging.getLogger("roost.stream_protocol")

# an offset specification's type as the stream queue names where a consumer starts
_SPEC_KINDS = {
    c.OFFSET_FIRST: "first",
    c.OFFSET_LAST: "last",
    c.OFFSET_NEXT: "next",
    c.OFFSET_OFFSET: "offset",
    c.OFFSET_TIMESTAMP: "timestamp",
}

# Create's arguments RabbitMQ takes as numbers (the frame carries strings)
_INT_ARGUMENTS = ("x-max-length-bytes", "x-stream-max-segment-size-bytes")


def code_for(error: BrokerError) -> int:
    if isinstance(error, AccessRefused):
        return c.ACCESS_REFUSED
    if isinstance(error, NotFound):
        return c.STREAM_DOES_NOT_EXIST
    if isinstance(error, PreconditionFailed | ResourceLocked):
        return c.PRECONDITION_FAILED
    return c.INTERNAL_ERROR


class Commands:
    def __init__(self, session: StreamSession) -> None:
        self.s = session
        self.port = session.port
        self.publishers: dict[int, Publisher] = {}
        self.subscriptions: dict[int, Subscription] = {}
        self._unconfirmed = 0
        self._confirms: dict[int, list[int]] = {}
        self._errors: dict[int, list[tuple[int, int]]] = {}
        self._flush_due = False
        self._waking: set[Subscription] = set()
        self._held_publisher = session.gate.publisher(self.port)  # congested queues hold it
        self._groups = single_active.groups_of(self.port)
        self._updates: dict[int, Subscription] = {}  # ConsumerUpdate sent, not answered
        self._next_update = 0

    @property
    def client(self) -> Client:
        assert self.s.client is not None
        return self.s.client

    def handle(self, frame: Frame) -> None:
        handler = self._handlers.get(type(frame))
        if handler is None:
            self.s.close_with(c.UNKNOWN_FRAME, f"{type(frame).__name__} is not a client command")
            return
        handler(self, frame)

    def _reply(self, key: int, correlation_id: int, code: int) -> None:
        self.s.send(Response(key, correlation_id, code))

    def _durably(self, key: int, correlation_id: int, change: Callable[[], None]) -> None:
        """Make a definition change, and answer once it is durable (or with its error)."""
        completion = self.port.durable_from_here()
        try:
            change()
        except BrokerError as exc:
            self._reply(key, correlation_id, code_for(exc))
            return
        def reply_when(error: BaseException | None) -> None:
            code = c.OK
            if error is not None:
                code = code_for(error) if isinstance(error, BrokerError) else c.INTERNAL_ERROR
            self._reply(key, correlation_id, code)

        pending: list[BaseException | None] = [None]
        finish = self.s.hold_until(lambda: reply_when(pending[0]))

        def done(error: BrokerError | None) -> None:
            pending[0] = error
            finish(error)

        if not completion.then(done):
            finish(None)

    # -- streams --------------------------------------------------------------------------

    def _create(self, f: Create) -> None:
        if self.port.is_stream(self.client, f.stream):
            self._reply(c.CREATE, f.correlation_id, c.STREAM_ALREADY_EXISTS)
            return
        arguments: dict[str, Any] = {"x-queue-type": "stream"}
        for key, value in f.arguments.items():
            if key in _INT_ARGUMENTS:
                if not value.isdigit():
                    self._reply(c.CREATE, f.correlation_id, c.PRECONDITION_FAILED)
                    return
                arguments[key] = int(value)
            elif key != "queue-leader-locator":
                arguments[key] = value
        self._durably(
            c.CREATE,
            f.correlation_id,
            lambda: self._declare(f.stream, arguments),
        )

    def _declare(self, name: str, arguments: dict[str, Any]) -> None:
        self.port.declare_queue(self.client, name, durable=True, arguments=arguments)

    def _delete(self, f: Delete) -> None:
        if not self.port.is_stream(self.client, f.stream):
            self._reply(c.DELETE, f.correlation_id, c.STREAM_DOES_NOT_EXIST)
            return
        self._durably(
            c.DELETE, f.correlation_id, lambda: self._delete_queue(f.stream)
        )

    def _delete_queue(self, name: str) -> None:
        self.port.delete_queue(self.client, name)

    def _metadata(self, f: Metadata) -> None:
        streams = [
            StreamMetadata(name, c.OK, 0, [])
            if self.port.is_stream(self.client, name)
            else StreamMetadata(name, c.STREAM_DOES_NOT_EXIST, 0xFFFF, [])
            for name in f.streams
        ]
        settings = self.s.settings
        broker = Broker(0, settings.advertised_host, settings.advertised_port)
        self.s.send(MetadataResponse(f.correlation_id, [broker], streams))

    def _stream_stats(self, f: StreamStats) -> None:
        try:
            stats = self.port.stream_stats(self.client, f.stream)
        except BrokerError as exc:
            self.s.send(StreamStatsResponse(f.correlation_id, code_for(exc), {}))
            return
        self.s.send(StreamStatsResponse(f.correlation_id, c.OK, stats))

    def _resolve_offset_spec(self, f: ResolveOffsetSpec) -> None:
        """The offset a Subscribe with this specification would start at (as an offset
        specification of type offset); a timestamp past the end resolves to the next."""
        spec = f.offset_spec
        kind = _SPEC_KINDS.get(spec.type, "next")
        try:
            offset = self.port.resolve_stream_offset(self.client, f.stream, kind, spec.value)
        except BrokerError as exc:
            self.s.send(ResolveOffsetSpecResponse(f.correlation_id, code_for(exc), spec.type, 0))
            return
        self.s.send(ResolveOffsetSpecResponse(f.correlation_id, c.OK, c.OFFSET_OFFSET, offset))

    # -- super streams --------------------------------------------------------------------

    def _create_super_stream(self, f: CreateSuperStream) -> None:
        if len(f.partitions) != len(f.binding_keys) or not f.partitions:
            self._reply(c.CREATE_SUPER_STREAM, f.correlation_id, c.PRECONDITION_FAILED)
            return
        if any(self.port.is_stream(self.client, p) for p in f.partitions):
            self._reply(c.CREATE_SUPER_STREAM, f.correlation_id, c.STREAM_ALREADY_EXISTS)
            return
        arguments: dict[str, Any] = {"x-queue-type": "stream"}
        for key, value in f.arguments.items():
            arguments[key] = int(value) if key in _INT_ARGUMENTS and value.isdigit() else value

        def change() -> None:
            port, client = self.port, self.client
            port.declare_exchange(
                client, f.name, "direct", durable=True, arguments={"x-super-stream": True}
            )
            for order, (stream, key) in enumerate(zip(f.partitions, f.binding_keys, strict=True)):
                port.declare_queue(client, stream, durable=True, arguments=dict(arguments))
                port.bind_queue(client, stream, f.name, key, {"x-stream-partition-order": order})

        self._durably(c.CREATE_SUPER_STREAM, f.correlation_id, change)

    def _delete_super_stream(self, f: DeleteSuperStream) -> None:
        try:
            partitions = self.port.super_stream_partitions(self.client, f.name)
        except BrokerError as exc:
            self._reply(c.DELETE_SUPER_STREAM, f.correlation_id, code_for(exc))
            return

        def change() -> None:
            self.port.delete_exchange(self.client, f.name)
            for stream in partitions:
                self.port.delete_queue(self.client, stream)

        self._durably(c.DELETE_SUPER_STREAM, f.correlation_id, change)

    def _route(self, f: Route) -> None:
        try:
            streams = self.port.super_stream_route(self.client, f.super_stream, f.routing_key)
        except BrokerError as exc:
            self.s.send(RouteResponse(f.correlation_id, code_for(exc), []))
            return
        self.s.send(RouteResponse(f.correlation_id, c.OK, streams))

    def _partitions(self, f: Partitions) -> None:
        try:
            streams = self.port.super_stream_partitions(self.client, f.super_stream)
        except BrokerError as exc:
            self.s.send(PartitionsResponse(f.correlation_id, code_for(exc), []))
            return
        self.s.send(PartitionsResponse(f.correlation_id, c.OK, streams))

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
        self._reply(c.DECLARE_PUBLISHER, f.correlation_id, code)

    def _publish(self, f: Publish) -> None:
        publisher = self.publishers.get(f.publisher_id)
        if publisher is None or not self.port.is_stream(self.client, publisher.stream):
            code = c.PUBLISHER_DOES_NOT_EXIST if publisher is None else c.STREAM_DOES_NOT_EXIST
            self.s.send(PublishError(f.publisher_id, [(m.publishing_id, code) for m in f.messages]))
            return
        simple = publish_batch.batchable(f.messages, publisher.reference)
        if simple is not None:
            self._publish_frame(publisher, simple)
        else:
            self._publish_each(publisher, f.messages)
        self.s.gate.published()  # a resource alarm in effect blocks us now
        if self._unconfirmed > self.s.settings.max_unconfirmed:
            self.s.gate.pause_for(UNCONFIRMED)

    def _publish_frame(self, publisher: Publisher, messages: list[PublishedMessage]) -> None:
        """The whole frame as one core publish (publish_batch.py), one confirm for all."""
        pid = publisher.id
        ids = [m.publishing_id for m in messages]
        message = publish_batch.batch_message(publisher.stream, messages, publisher.reference)
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

    # -- consuming ------------------------------------------------------------------------

    def _subscribe(self, f: Subscribe) -> None:
        if f.subscription_id in self.subscriptions:
            self._reply(c.SUBSCRIBE, f.correlation_id, c.SUBSCRIPTION_ID_ALREADY_EXISTS)
            return
        if not self.port.is_stream(self.client, f.stream):
            self._reply(c.SUBSCRIBE, f.correlation_id, c.STREAM_DOES_NOT_EXIST)
            return
        single = f.properties.get("single-active-consumer", "").lower() == "true"
        name = f.properties.get("name", "")
        if single and not name:  # RabbitMQ: a single active consumer needs a name
            self._reply(c.SUBSCRIBE, f.correlation_id, c.PRECONDITION_FAILED)
            return
        sub = Subscription(
            f.subscription_id,
            f.stream,
            f.credit,
            frame_max=self.s.frame_max,
            write=self.s.write,
            wake=self._wake,
            gone=self._gone,
            fail=lambda error: self.s.close_with(code_for(error), error.text),
            filter_values=frozenset(
                v for k, v in f.properties.items() if k.startswith("filter.")
            ) or None,
            match_unfiltered=f.properties.get("match-unfiltered", "").lower() == "true",
        )
        sub.spec = f.offset_spec
        if not single:
            try:
                self._start(sub, f.offset_spec)
            except BrokerError as exc:
                self._reply(c.SUBSCRIBE, f.correlation_id, code_for(exc))
                return
            self.subscriptions[f.subscription_id] = sub
            self._reply(c.SUBSCRIBE, f.correlation_id, c.OK)
            self._begin(sub)
            return
        sub.group = (self.client.vhost.name, f.stream, name)
        sub.active = False
        self.subscriptions[f.subscription_id] = sub
        self._reply(c.SUBSCRIBE, f.correlation_id, c.OK)
        if single_active.join(self._groups, sub.group, (self, sub)):
            self._activate(sub)

    def _start(self, sub: Subscription, spec: OffsetSpec) -> None:
        """The core consumer of a subscription, from ``spec``; deliveries begin with
        ``_begin`` (after the Subscribe response is written)."""
        try:
            session = self.port.open_session(self.client, sub, number=sub.id)
            sub.session = session
            session.set_qos(PREFETCH, False)
            sub.consumer = self.port.consume(
                session,
                sub.stream,
                f"stream-{sub.id}",
                no_ack=False,
                exclusive=False,
                arguments={**offset_arguments(spec.type, spec.value), **sub.core_arguments()},
            )
        except BrokerError:
            if sub.session is not None:
                self.port.close_session(sub.session)
                sub.session = None
            raise

    def _begin(self, sub: Subscription) -> None:
        if sub.session is not None and sub.consumer is not None:
            sub.session.start(sub.consumer)

    # -- single active consumer -----------------------------------------------------------

    def _activate(self, sub: Subscription) -> None:
        """Tell the client this subscription is now the active one; it answers with
        the offset to start from (ConsumerUpdateResponse)."""
        self._next_update += 1
        self._updates[self._next_update] = sub
        self.s.send(ConsumerUpdate(self._next_update, sub.id, True))

    def _consumer_update_response(self, f: ConsumerUpdateResponse) -> None:
        sub = self._updates.pop(f.correlation_id, None)
        if sub is None or self.subscriptions.get(sub.id) is not sub or sub.session is not None:
            return
        spec = f.offset_spec if f.offset_spec.type != c.OFFSET_NONE else sub.spec
        sub.active = True
        try:
            self._start(sub, spec)
        except BrokerError as exc:
            self.s.close_with(code_for(exc), exc.text)
            return
        self._begin(sub)

    def _leave(self, sub: Subscription) -> None:
        if sub.group is not None:
            group, sub.group = sub.group, None
            single_active.leave(
                self._groups, group, (self, sub), lambda member: member[0]._activate(member[1])
            )

    def _wake(self, sub: Subscription) -> None:
        if self.s.gate.flow_held:  # its Credit must be read: the socket may not wait
            self.s.gate.update_congestion()
        if sub.credit > 0:
            self._waking.add(sub)
            self._schedule()

    def _gone(self, sub: Subscription) -> None:
        """The stream was deleted: RabbitMQ tells with MetadataUpdate, then the client
        resubscribes or not."""
        if self.subscriptions.pop(sub.id, None) is not None:
            self._stop(sub)
            self.s.send(MetadataUpdate(c.STREAM_NOT_AVAILABLE, sub.stream))

    def _stop(self, sub: Subscription) -> None:
        sub.drop_pending()
        if sub.session is not None:
            self.port.close_session(sub.session)
            sub.session = None
        self._leave(sub)

    def _credit(self, f: Credit) -> None:
        sub = self.subscriptions.get(f.subscription_id)
        if sub is None:
            self.s.send(CreditResponse(c.SUBSCRIPTION_ID_DOES_NOT_EXIST, f.subscription_id))
            return
        sub.credit += f.credit
        sub.flush()

    def _unsubscribe(self, f: Unsubscribe) -> None:
        sub = self.subscriptions.pop(f.subscription_id, None)
        if sub is None:
            self._reply(c.UNSUBSCRIBE, f.correlation_id, c.SUBSCRIPTION_ID_DOES_NOT_EXIST)
            return
        self._stop(sub)
        self._reply(c.UNSUBSCRIBE, f.correlation_id, c.OK)

    def _store_offset(self, f: StoreOffset) -> None:
        try:  # no response in the protocol: a refusal is only logged, as RabbitMQ does
            self.port.store_stream_offset(self.client, f.stream, f.reference, f.offset)
        except BrokerError as exc:
            log.info("%s: StoreOffset on '%s' refused: %s", self.s.transport.peer, f.stream, exc)

    def _query_offset(self, f: QueryOffset) -> None:
        try:
            stored = self.port.stream_offset(self.client, f.stream, f.reference)
        except BrokerError as exc:
            self.s.send(QueryOffsetResponse(f.correlation_id, code_for(exc), 0))
            return
        code = c.NO_OFFSET if stored is None else c.OK
        self.s.send(QueryOffsetResponse(f.correlation_id, code, stored or 0))

    # -- one turn of the loop: confirms and chunks ----------------------------------------

    def _schedule(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            self.s.clock.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_due = False
        if self.s.client is None:
            return
        for pid, ids in self._confirms.items():
            self.s.send(PublishConfirm(pid, ids))
        self._confirms = {}
        for pid, errors in self._errors.items():
            self.s.send(PublishError(pid, errors))
        self._errors = {}
        waking, self._waking = self._waking, set()
        for sub in waking:
            sub.flush()
        if self._unconfirmed <= self.s.settings.max_unconfirmed // 2:
            self.s.gate.resume_for(UNCONFIRMED)

    def release(self) -> None:
        """The connection is gone: its subscriptions leave their groups (the next
        member of a single-active group becomes active); the core frees the rest."""
        subscriptions = list(self.subscriptions.values())
        self.subscriptions.clear()
        for sub in subscriptions:
            sub.drop_pending()
            self._leave(sub)
        self.publishers.clear()

    _handlers: dict[type, Callable[[Commands, Any], None]] = {
        Create: _create,
        Delete: _delete,
        Metadata: _metadata,
        StreamStats: _stream_stats,
        ResolveOffsetSpec: _resolve_offset_spec,
        CreateSuperStream: _create_super_stream,
        DeleteSuperStream: _delete_super_stream,
        Route: _route,
        Partitions: _partitions,
        DeclarePublisher: _declare_publisher,
        Publish: _publish,
        QueryPublisherSequence: _query_publisher_sequence,
        DeletePublisher: _delete_publisher,
        Subscribe: _subscribe,
        ConsumerUpdateResponse: _consumer_update_response,
        Credit: _credit,
        Unsubscribe: _unsubscribe,
        StoreOffset: _store_offset,
        QueryOffset: _query_offset,
    }

