"""Stream protocol frames as dataclasses, one per command and direction.

``KEY`` is the command key without the response bit. Requests that expect an answer
carry a ``correlation_id``; commands that never get one (Publish, Credit, StoreOffset,
Heartbeat, Deliver, ...) do not. Responses whose body is only the response code share
``Response``, which names its command in ``key``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from roost.stream_protocol.chunks import SubBatchEntry
from roost.stream_protocol.constants import (
    CLOSE,
    CONSUMER_UPDATE,
    CREATE,
    CREATE_SUPER_STREAM,
    CREDIT,
    DECLARE_PUBLISHER,
    DELETE,
    DELETE_PUBLISHER,
    DELETE_SUPER_STREAM,
    DELIVER,
    EXCHANGE_COMMAND_VERSIONS,
    HEARTBEAT,
    METADATA,
    METADATA_UPDATE,
    OFFSET_FIRST,
    OFFSET_LAST,
    OFFSET_NEXT,
    OFFSET_NONE,
    OFFSET_OFFSET,
    OFFSET_TIMESTAMP,
    OPEN,
    PARTITIONS,
    PEER_PROPERTIES,
    PUBLISH,
    PUBLISH_CONFIRM,
    PUBLISH_ERROR,
    QUERY_OFFSET,
    QUERY_PUBLISHER_SEQUENCE,
    RESOLVE_OFFSET_SPEC,
    ROUTE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    STORE_OFFSET,
    STREAM_STATS,
    SUBSCRIBE,
    TUNE,
    UNSUBSCRIBE,
)


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a subscription starts: ``type`` is an ``OFFSET_*`` constant; ``value`` is
    the offset (OFFSET_OFFSET) or the timestamp in ms (OFFSET_TIMESTAMP), else None."""

    type: int
    value: int | None = None

    @classmethod
    def first(cls) -> OffsetSpec:
        return cls(OFFSET_FIRST)

    @classmethod
    def last(cls) -> OffsetSpec:
        return cls(OFFSET_LAST)

    @classmethod
    def next(cls) -> OffsetSpec:
        return cls(OFFSET_NEXT)

    @classmethod
    def offset(cls, offset: int) -> OffsetSpec:
        return cls(OFFSET_OFFSET, offset)

    @classmethod
    def timestamp(cls, ms: int) -> OffsetSpec:
        return cls(OFFSET_TIMESTAMP, ms)

    @classmethod
    def none(cls) -> OffsetSpec:
        return cls(OFFSET_NONE)


# -- connection ---------------------------------------------------------------------------


@dataclass(slots=True)
class PeerProperties:
    correlation_id: int
    properties: dict[str, str] = field(default_factory=dict)
    KEY: ClassVar[int] = PEER_PROPERTIES


@dataclass(slots=True)
class PeerPropertiesResponse:
    correlation_id: int
    response_code: int
    properties: dict[str, str] = field(default_factory=dict)
    KEY: ClassVar[int] = PEER_PROPERTIES


@dataclass(slots=True)
class SaslHandshake:
    correlation_id: int
    KEY: ClassVar[int] = SASL_HANDSHAKE


@dataclass(slots=True)
class SaslHandshakeResponse:
    correlation_id: int
    response_code: int
    mechanisms: list[str] = field(default_factory=list)
    KEY: ClassVar[int] = SASL_HANDSHAKE


@dataclass(slots=True)
class SaslAuthenticate:
    correlation_id: int
    mechanism: str
    data: bytes = b""  # sent as null (-1) when empty, as RabbitMQ's own encoder does
    KEY: ClassVar[int] = SASL_AUTHENTICATE


@dataclass(slots=True)
class SaslAuthenticateResponse:
    correlation_id: int
    response_code: int
    challenge: bytes = b""  # only with SASL_CHALLENGE
    KEY: ClassVar[int] = SASL_AUTHENTICATE


@dataclass(slots=True)
class Tune:
    """Sent by the server; the client answers with the same command, its key's response
    bit set (``response=True``; rstream sends it without the bit, which RabbitMQ also
    takes). ``frame_max`` 0 and ``heartbeat`` 0 mean no limit and no heartbeats."""

    frame_max: int
    heartbeat: int
    response: bool = False
    KEY: ClassVar[int] = TUNE


@dataclass(slots=True)
class Open:
    correlation_id: int
    virtual_host: str
    KEY: ClassVar[int] = OPEN


@dataclass(slots=True)
class OpenResponse:
    """``properties`` (RabbitMQ: ``advertised_host``, ``advertised_port``) go out only
    when there are some."""

    correlation_id: int
    response_code: int
    properties: dict[str, str] = field(default_factory=dict)
    KEY: ClassVar[int] = OPEN


@dataclass(slots=True)
class Close:
    """Either side may send it; the other answers with ``Response(CLOSE, ...)``."""

    correlation_id: int
    code: int
    reason: str
    KEY: ClassVar[int] = CLOSE


@dataclass(slots=True)
class Heartbeat:
    KEY: ClassVar[int] = HEARTBEAT


@dataclass(slots=True)
class CommandVersion:
    key: int
    min_version: int
    max_version: int


@dataclass(slots=True)
class ExchangeCommandVersions:
    correlation_id: int
    commands: list[CommandVersion] = field(default_factory=list)
    KEY: ClassVar[int] = EXCHANGE_COMMAND_VERSIONS


@dataclass(slots=True)
class ExchangeCommandVersionsResponse:
    correlation_id: int
    response_code: int
    commands: list[CommandVersion] = field(default_factory=list)
    KEY: ClassVar[int] = EXCHANGE_COMMAND_VERSIONS


@dataclass(slots=True)
class Response:
    """A response that is only a response code, to the command ``key``: DeclarePublisher,
    DeletePublisher, Subscribe, Unsubscribe, Create, Delete, Close, CreateSuperStream,
    DeleteSuperStream."""

    key: int
    correlation_id: int
    response_code: int


# -- streams ------------------------------------------------------------------------------


@dataclass(slots=True)
class Create:
    correlation_id: int
    stream: str
    arguments: dict[str, str] = field(default_factory=dict)
    KEY: ClassVar[int] = CREATE


@dataclass(slots=True)
class Delete:
    correlation_id: int
    stream: str
    KEY: ClassVar[int] = DELETE


@dataclass(slots=True)
class Metadata:
    correlation_id: int
    streams: list[str]
    KEY: ClassVar[int] = METADATA


@dataclass(slots=True)
class Broker:
    reference: int
    host: str
    port: int


@dataclass(slots=True)
class StreamMetadata:
    """``leader`` is a broker reference, 0xFFFF when the stream has none (not found)."""

    stream: str
    response_code: int
    leader: int
    replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class MetadataResponse:
    """No response code of its own: each stream carries one."""

    correlation_id: int
    brokers: list[Broker]
    streams: list[StreamMetadata]
    KEY: ClassVar[int] = METADATA


@dataclass(slots=True)
class MetadataUpdate:
    code: int  # STREAM_NOT_AVAILABLE when the stream went away or moved
    stream: str
    KEY: ClassVar[int] = METADATA_UPDATE


@dataclass(slots=True)
class StreamStats:
    correlation_id: int
    stream: str
    KEY: ClassVar[int] = STREAM_STATS


@dataclass(slots=True)
class StreamStatsResponse:
    """RabbitMQ's keys: ``first_chunk_id``, ``committed_chunk_id`` (-1 when empty)."""

    correlation_id: int
    response_code: int
    stats: dict[str, int] = field(default_factory=dict)
    KEY: ClassVar[int] = STREAM_STATS


@dataclass(slots=True)
class CreateSuperStream:
    correlation_id: int
    name: str
    partitions: list[str]
    binding_keys: list[str]
    arguments: dict[str, str] = field(default_factory=dict)
    KEY: ClassVar[int] = CREATE_SUPER_STREAM


@dataclass(slots=True)
class DeleteSuperStream:
    correlation_id: int
    name: str
    KEY: ClassVar[int] = DELETE_SUPER_STREAM


@dataclass(slots=True)
class Route:
    correlation_id: int
    routing_key: str
    super_stream: str
    KEY: ClassVar[int] = ROUTE


@dataclass(slots=True)
class RouteResponse:
    correlation_id: int
    response_code: int
    streams: list[str] = field(default_factory=list)
    KEY: ClassVar[int] = ROUTE


@dataclass(slots=True)
class Partitions:
    correlation_id: int
    super_stream: str
    KEY: ClassVar[int] = PARTITIONS


@dataclass(slots=True)
class PartitionsResponse:
    correlation_id: int
    response_code: int
    streams: list[str] = field(default_factory=list)
    KEY: ClassVar[int] = PARTITIONS


# -- publishing ---------------------------------------------------------------------------


@dataclass(slots=True)
class DeclarePublisher:
    correlation_id: int
    publisher_id: int
    reference: str  # "" without deduplication
    stream: str
    KEY: ClassVar[int] = DECLARE_PUBLISHER


@dataclass(slots=True)
class PublishedMessage:
    """One message of a Publish; ``filter_value`` only in version 2 (None is sent as a
    null string there)."""

    publishing_id: int
    data: bytes
    filter_value: str | None = None


@dataclass(slots=True)
class PublishedBatch:
    """A sub-batch entry of a version 1 Publish: one publishing id for all its records."""

    publishing_id: int
    entry: SubBatchEntry


@dataclass(slots=True)
class Publish:
    """``version`` 2 carries a filter value per message; sub-batches exist in 1 only."""

    publisher_id: int
    messages: list[PublishedMessage | PublishedBatch]
    version: int = 1
    KEY: ClassVar[int] = PUBLISH


@dataclass(slots=True)
class PublishConfirm:
    publisher_id: int
    publishing_ids: list[int]
    KEY: ClassVar[int] = PUBLISH_CONFIRM


@dataclass(slots=True)
class PublishError:
    publisher_id: int
    errors: list[tuple[int, int]]  # (publishing id, response code)
    KEY: ClassVar[int] = PUBLISH_ERROR


@dataclass(slots=True)
class QueryPublisherSequence:
    correlation_id: int
    reference: str
    stream: str
    KEY: ClassVar[int] = QUERY_PUBLISHER_SEQUENCE


@dataclass(slots=True)
class QueryPublisherSequenceResponse:
    correlation_id: int
    response_code: int
    sequence: int
    KEY: ClassVar[int] = QUERY_PUBLISHER_SEQUENCE


@dataclass(slots=True)
class DeletePublisher:
    correlation_id: int
    publisher_id: int
    KEY: ClassVar[int] = DELETE_PUBLISHER


# -- consuming ----------------------------------------------------------------------------


@dataclass(slots=True)
class Subscribe:
    """``properties``: ``single-active-consumer``, ``super-stream``, ``name``,
    ``filter.N``, ``match-unfiltered``, ... (left off the wire when empty)."""

    correlation_id: int
    subscription_id: int
    stream: str
    offset_spec: OffsetSpec
    credit: int
    properties: dict[str, str] = field(default_factory=dict)
    KEY: ClassVar[int] = SUBSCRIBE


@dataclass(slots=True)
class Deliver:
    """One chunk (``chunks.py``) for a subscription, as opaque bytes: header and data.
    Version 2 (``committed_chunk_id`` set) also says the highest committed chunk id. To
    send a chunk without copying it, write ``codec.encode_deliver_head(...)`` and then
    the chunk's own buffers."""

    subscription_id: int
    chunk: bytes
    committed_chunk_id: int | None = None
    KEY: ClassVar[int] = DELIVER


@dataclass(slots=True)
class Credit:
    subscription_id: int
    credit: int  # chunks
    KEY: ClassVar[int] = CREDIT


@dataclass(slots=True)
class CreditResponse:
    """Sent only on a problem (an unknown subscription); no correlation id."""

    response_code: int
    subscription_id: int
    KEY: ClassVar[int] = CREDIT


@dataclass(slots=True)
class Unsubscribe:
    correlation_id: int
    subscription_id: int
    KEY: ClassVar[int] = UNSUBSCRIBE


@dataclass(slots=True)
class StoreOffset:
    reference: str
    stream: str
    offset: int
    KEY: ClassVar[int] = STORE_OFFSET


@dataclass(slots=True)
class QueryOffset:
    correlation_id: int
    reference: str
    stream: str
    KEY: ClassVar[int] = QUERY_OFFSET


@dataclass(slots=True)
class QueryOffsetResponse:
    correlation_id: int
    response_code: int
    offset: int
    KEY: ClassVar[int] = QUERY_OFFSET


@dataclass(slots=True)
class ConsumerUpdate:
    """The server's question to a single-active-consumer subscription: you are (in)active."""

    correlation_id: int
    subscription_id: int
    active: bool
    KEY: ClassVar[int] = CONSUMER_UPDATE


@dataclass(slots=True)
class ConsumerUpdateResponse:
    """The client's answer: where the newly active consumer wants to start
    (``OffsetSpec.none()``: where its subscription said)."""

    correlation_id: int
    response_code: int
    offset_spec: OffsetSpec
    KEY: ClassVar[int] = CONSUMER_UPDATE


@dataclass(slots=True)
class ResolveOffsetSpec:
    correlation_id: int
    stream: str
    offset_spec: OffsetSpec
    properties: dict[str, str] = field(default_factory=dict)
    KEY: ClassVar[int] = RESOLVE_OFFSET_SPEC


@dataclass(slots=True)
class ResolveOffsetSpecResponse:
    correlation_id: int
    response_code: int
    offset_type: int
    offset: int
    KEY: ClassVar[int] = RESOLVE_OFFSET_SPEC


Frame = (
    PeerProperties | PeerPropertiesResponse | SaslHandshake | SaslHandshakeResponse
    | SaslAuthenticate | SaslAuthenticateResponse | Tune | Open | OpenResponse | Close
    | Heartbeat | ExchangeCommandVersions | ExchangeCommandVersionsResponse | Response
    | Create | Delete | Metadata | MetadataResponse | MetadataUpdate | StreamStats
    | StreamStatsResponse | CreateSuperStream | DeleteSuperStream | Route | RouteResponse
    | Partitions | PartitionsResponse | DeclarePublisher | Publish | PublishConfirm
    | PublishError | QueryPublisherSequence | QueryPublisherSequenceResponse
    | DeletePublisher | Subscribe | Deliver | Credit | CreditResponse | Unsubscribe
    | StoreOffset | QueryOffset | QueryOffsetResponse | ConsumerUpdate
    | ConsumerUpdateResponse | ResolveOffsetSpec | ResolveOffsetSpecResponse
)
