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

from collections.abc import Callable
from typing import Any

from roost.core import BrokerError
from roost.stream_protocol import constants as c
from roost.stream_protocol.commands_base import (
    _INT_ARGUMENTS,
    _SPEC_KINDS,
    UNCONFIRMED,
    code_for,
)
from roost.stream_protocol.commands_consume import ConsumeCommands
from roost.stream_protocol.commands_publish import PublishCommands
from roost.stream_protocol.frames import (
    Broker,
    ConsumerUpdateResponse,
    Create,
    CreateSuperStream,
    Credit,
    DeclarePublisher,
    Delete,
    DeletePublisher,
    DeleteSuperStream,
    Frame,
    Metadata,
    MetadataResponse,
    Partitions,
    PartitionsResponse,
    Publish,
    QueryOffset,
    QueryPublisherSequence,
    ResolveOffsetSpec,
    ResolveOffsetSpecResponse,
    Route,
    RouteResponse,
    StoreOffset,
    StreamMetadata,
    StreamStats,
    StreamStatsResponse,
    Subscribe,
    Unsubscribe,
)
from roost.stream_protocol.leader_queries import ask_resolve, ask_stats

__all__ = ["UNCONFIRMED", "Commands", "code_for"]


class Commands(PublishCommands, ConsumeCommands):
    """Every command of an open connection; publishing and consuming are in
    commands_publish.py and commands_consume.py."""

    def handle(self, frame: Frame) -> None:
        handler = self._handlers.get(type(frame))
        if handler is None:
            self.s.close_with(c.UNKNOWN_FRAME, f"{type(frame).__name__} is not a client command")
            return
        handler(self, frame)

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
        """Each stream's leader and replicas as broker references, as RabbitMQ answers:
        on a cluster the nodes' advertised stream addresses (a client publishes to the
        leader and may consume from a replica); a stream whose leader's node is down
        (a failover under way) is STREAM_NOT_AVAILABLE."""
        settings = self.s.settings
        refs: dict[tuple[str, int], int] = {
            (settings.advertised_host, settings.advertised_port): 0
        }

        def ref(address: tuple[str, int]) -> int:
            return refs.setdefault(address, len(refs))

        streams = []
        for name in f.streams:
            if not self.port.is_stream(self.client, name):
                streams.append(StreamMetadata(name, c.STREAM_DOES_NOT_EXIST, 0xFFFF, []))
                continue
            hosts = self.port.stream_hosts(self.client, name)
            if hosts is None:  # served here alone
                streams.append(StreamMetadata(name, c.OK, 0, []))
                continue
            leader, replicas = hosts
            others = [ref(r) for r in replicas]
            if leader is None:
                streams.append(StreamMetadata(name, c.STREAM_NOT_AVAILABLE, 0xFFFF, others))
            else:
                streams.append(StreamMetadata(name, c.OK, ref(leader), others))
        brokers = [Broker(n, host, port) for (host, port), n in refs.items()]
        self.s.send(MetadataResponse(f.correlation_id, brokers, streams))

    def _stream_stats(self, f: StreamStats) -> None:
        if ask_stats(self, f):  # no copy here: its leader answers
            return
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
        if ask_resolve(self, f, kind):  # no copy here: its leader answers
            return
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

    def release(self) -> None:
        """The connection is gone: its subscriptions leave their groups (the next
        member of a single-active group becomes active); the core frees the rest."""
        subscriptions = list(self.subscriptions.values())
        self.subscriptions.clear()
        for sub in subscriptions:
            sub.drop_pending()
            self._leave(sub)
        self.publishers.clear()
        for unwatch in self._watching.values():
            unwatch()
        self._watching.clear()

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
        DeclarePublisher: PublishCommands._declare_publisher,
        Publish: PublishCommands._publish,
        QueryPublisherSequence: PublishCommands._query_publisher_sequence,
        DeletePublisher: PublishCommands._delete_publisher,
        Subscribe: ConsumeCommands._subscribe,
        ConsumerUpdateResponse: ConsumeCommands._consumer_update_response,
        Credit: ConsumeCommands._credit,
        Unsubscribe: ConsumeCommands._unsubscribe,
        StoreOffset: ConsumeCommands._store_offset,
        QueryOffset: ConsumeCommands._query_offset,
    }

