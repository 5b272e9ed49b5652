"""Stream protocol frames as dataclasses, one per command and direction.

``KEY`` is the command key without the response bit. Requests that expect an answer
carry a ``correlation_id``; commands that never get one (Publish, Credit, StoreOffset,
Heartbeat, Deliver, ...) do not. Responses whose body is only the response code share
``Response``, which names its command in ``key``.
"""


from __future__ import annotations

from roost.stream_protocol.frames_control import (
    Broker,
    Close,
    CommandVersion,
    Create,
    CreateSuperStream,
    Delete,
    DeleteSuperStream,
    ExchangeCommandVersions,
    ExchangeCommandVersionsResponse,
    Heartbeat,
    Metadata,
    MetadataResponse,
    MetadataUpdate,
    Open,
    OpenResponse,
    Partitions,
    PartitionsResponse,
    PeerProperties,
    PeerPropertiesResponse,
    Response,
    Route,
    RouteResponse,
    SaslAuthenticate,
    SaslAuthenticateResponse,
    SaslHandshake,
    SaslHandshakeResponse,
    StreamMetadata,
    StreamStats,
    StreamStatsResponse,
    Tune,
)
from roost.stream_protocol.frames_data import (
    ConsumerUpdate,
    ConsumerUpdateResponse,
    Credit,
    CreditResponse,
    DeclarePublisher,
    DeletePublisher,
    Deliver,
    OffsetSpec,
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
    StoreOffset,
    Subscribe,
    Unsubscribe,
)

__all__ = [
    "Broker",
    "Close",
    "CommandVersion",
    "ConsumerUpdate",
    "ConsumerUpdateResponse",
    "Create",
    "CreateSuperStream",
    "Credit",
    "CreditResponse",
    "DeclarePublisher",
    "Delete",
    "DeletePublisher",
    "DeleteSuperStream",
    "Deliver",
    "ExchangeCommandVersions",
    "ExchangeCommandVersionsResponse",
    "Frame",
    "Heartbeat",
    "Metadata",
    "MetadataResponse",
    "MetadataUpdate",
    "OffsetSpec",
    "Open",
    "OpenResponse",
    "Partitions",
    "PartitionsResponse",
    "PeerProperties",
    "PeerPropertiesResponse",
    "Publish",
    "PublishConfirm",
    "PublishError",
    "PublishedBatch",
    "PublishedMessage",
    "QueryOffset",
    "QueryOffsetResponse",
    "QueryPublisherSequence",
    "QueryPublisherSequenceResponse",
    "ResolveOffsetSpec",
    "ResolveOffsetSpecResponse",
    "Response",
    "Route",
    "RouteResponse",
    "SaslAuthenticate",
    "SaslAuthenticateResponse",
    "SaslHandshake",
    "SaslHandshakeResponse",
    "StoreOffset",
    "StreamMetadata",
    "StreamStats",
    "StreamStatsResponse",
    "Subscribe",
    "Tune",
    "Unsubscribe",
]

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
