"""Stream protocol frames for the connection and for managing streams and super streams
(PROTOCOL.adoc: PeerProperties to Close, Create to Partitions, ExchangeCommandVersions,
StreamStats). ``frames.py`` gathers every frame; see its docstring."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from roost.stream_protocol.constants import (
    CLOSE,
    CREATE,
    CREATE_SUPER_STREAM,
    DELETE,
    DELETE_SUPER_STREAM,
    EXCHANGE_COMMAND_VERSIONS,
    HEARTBEAT,
    METADATA,
    METADATA_UPDATE,
    OPEN,
    PARTITIONS,
    PEER_PROPERTIES,
    ROUTE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    STREAM_STATS,
    TUNE,
)

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
