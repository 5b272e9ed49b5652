"""Encoders of every stream protocol frame. A Deliver can also be written as
``encode_deliver_head`` followed by the chunk's own buffers, so a stored chunk goes
out without being copied or re-encoded."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from roost.stream_protocol import wire
from roost.stream_protocol.chunks import SimpleEntry, encode_entry
from roost.stream_protocol.constants import (
    DELIVER,
    OFFSET_OFFSET,
    OFFSET_TIMESTAMP,
    RESPONSE_FLAG,
    TUNE,
)
from roost.stream_protocol.frames import (
    Close,
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
    Deliver,
    ExchangeCommandVersions,
    ExchangeCommandVersionsResponse,
    Frame,
    Heartbeat,
    Metadata,
    MetadataResponse,
    MetadataUpdate,
    OffsetSpec,
    Open,
    OpenResponse,
    Partitions,
    PartitionsResponse,
    PeerProperties,
    PeerPropertiesResponse,
    Publish,
    PublishConfirm,
    PublishedBatch,
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
    SaslAuthenticate,
    SaslAuthenticateResponse,
    SaslHandshake,
    SaslHandshakeResponse,
    StoreOffset,
    StreamStats,
    StreamStatsResponse,
    Subscribe,
    Tune,
    Unsubscribe,
)
from roost.stream_protocol.wire import U16, U32, U64

R: Final = RESPONSE_FLAG
_HEAD = struct.Struct(">IHH")
_DELIVER_V1 = struct.Struct(">IHHB")
_DELIVER_V2 = struct.Struct(">IHHBQ")



def _spec(spec: OffsetSpec) -> bytes:
    if spec.type == OFFSET_OFFSET:
        return U16.pack(spec.type) + U64.pack(spec.value or 0)
    if spec.type == OFFSET_TIMESTAMP:
        return U16.pack(spec.type) + wire.I64.pack(spec.value or 0)
    return U16.pack(spec.type)


def _map_if_any(items: dict[str, str]) -> bytes:
    return wire.string_map(items) if items else b""


def _publish_body(f: Publish) -> bytes:
    parts = [bytes((f.publisher_id,)), U32.pack(len(f.messages))]
    for m in f.messages:
        parts.append(U64.pack(m.publishing_id))
        if isinstance(m, PublishedBatch):
            if f.version != 1:
                raise ValueError("sub-batches exist in Publish version 1 only")
            parts.append(encode_entry(m.entry))
            continue
        if f.version == 2:
            fv = m.filter_value
            parts.append(wire.NULL_STRING if fv is None else wire.string(fv))
        elif m.filter_value is not None:
            raise ValueError("filter values need Publish version 2")
        parts.append(encode_entry(SimpleEntry(m.data)))
    return b"".join(parts)


def _u8(v: int) -> bytes:
    return bytes((v,))


def _c(corr: int) -> bytes:
    return U32.pack(corr)


def _cc(corr: int, code: int) -> bytes:
    return U32.pack(corr) + U16.pack(code)


_s = wire.string
_BODIES: Final[dict[type, Callable[[Any], bytes]]] = {
    PeerProperties: lambda f: _c(f.correlation_id) + wire.string_map(f.properties),
    PeerPropertiesResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + wire.string_map(f.properties),
    SaslHandshake: lambda f: _c(f.correlation_id),
    SaslHandshakeResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + wire.strings(f.mechanisms),
    SaslAuthenticate: lambda f: _c(f.correlation_id) + _s(f.mechanism)
    + (wire.data(f.data) if f.data else wire.NULL_BYTES),
    SaslAuthenticateResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + (U16.pack(len(f.challenge)) + f.challenge if f.challenge else b""),
    Tune: lambda f: U32.pack(f.frame_max) + U32.pack(f.heartbeat),
    Open: lambda f: _c(f.correlation_id) + _s(f.virtual_host),
    OpenResponse: lambda f: _cc(f.correlation_id, f.response_code) + _map_if_any(f.properties),
    Close: lambda f: _c(f.correlation_id) + U16.pack(f.code) + _s(f.reason),
    Heartbeat: lambda f: b"",
    ExchangeCommandVersions: lambda f: _c(f.correlation_id) + U32.pack(len(f.commands))
    + b"".join(U16.pack(c.key) + U16.pack(c.min_version) + U16.pack(c.max_version)
               for c in f.commands),
    ExchangeCommandVersionsResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + U32.pack(len(f.commands))
    + b"".join(U16.pack(c.key) + U16.pack(c.min_version) + U16.pack(c.max_version)
               for c in f.commands),
    Response: lambda f: _cc(f.correlation_id, f.response_code),
    Create: lambda f: _c(f.correlation_id) + _s(f.stream) + wire.string_map(f.arguments),
    Delete: lambda f: _c(f.correlation_id) + _s(f.stream),
    Metadata: lambda f: _c(f.correlation_id) + wire.strings(f.streams),
    MetadataResponse: lambda f: _c(f.correlation_id) + U32.pack(len(f.brokers))
    + b"".join(U16.pack(b.reference) + _s(b.host) + U32.pack(b.port) for b in f.brokers)
    + U32.pack(len(f.streams))
    + b"".join(_s(m.stream) + U16.pack(m.response_code) + U16.pack(m.leader)
               + U32.pack(len(m.replicas)) + b"".join(U16.pack(x) for x in m.replicas)
               for m in f.streams),
    MetadataUpdate: lambda f: U16.pack(f.code) + _s(f.stream),
    StreamStats: lambda f: _c(f.correlation_id) + _s(f.stream),
    StreamStatsResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + U32.pack(len(f.stats)) + b"".join(_s(k) + wire.I64.pack(v) for k, v in f.stats.items()),
    CreateSuperStream: lambda f: _c(f.correlation_id) + _s(f.name) + wire.strings(f.partitions)
    + wire.strings(f.binding_keys) + wire.string_map(f.arguments),
    DeleteSuperStream: lambda f: _c(f.correlation_id) + _s(f.name),
    Route: lambda f: _c(f.correlation_id) + _s(f.routing_key) + _s(f.super_stream),
    RouteResponse: lambda f: _cc(f.correlation_id, f.response_code) + wire.strings(f.streams),
    Partitions: lambda f: _c(f.correlation_id) + _s(f.super_stream),
    PartitionsResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + wire.strings(f.streams),
    DeclarePublisher: lambda f: _c(f.correlation_id) + _u8(f.publisher_id) + _s(f.reference)
    + _s(f.stream),
    Publish: _publish_body,
    PublishConfirm: lambda f: _u8(f.publisher_id) + U32.pack(len(f.publishing_ids))
    + b"".join(U64.pack(i) for i in f.publishing_ids),
    PublishError: lambda f: _u8(f.publisher_id) + U32.pack(len(f.errors))
    + b"".join(U64.pack(i) + U16.pack(c) for i, c in f.errors),
    QueryPublisherSequence: lambda f: _c(f.correlation_id) + _s(f.reference) + _s(f.stream),
    QueryPublisherSequenceResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + U64.pack(f.sequence),
    DeletePublisher: lambda f: _c(f.correlation_id) + _u8(f.publisher_id),
    Subscribe: lambda f: _c(f.correlation_id) + _u8(f.subscription_id) + _s(f.stream)
    + _spec(f.offset_spec) + U16.pack(f.credit) + _map_if_any(f.properties),
    Credit: lambda f: _u8(f.subscription_id) + U16.pack(f.credit),
    CreditResponse: lambda f: U16.pack(f.response_code) + _u8(f.subscription_id),
    Unsubscribe: lambda f: _c(f.correlation_id) + _u8(f.subscription_id),
    StoreOffset: lambda f: _s(f.reference) + _s(f.stream) + U64.pack(f.offset),
    QueryOffset: lambda f: _c(f.correlation_id) + _s(f.reference) + _s(f.stream),
    QueryOffsetResponse: lambda f: _cc(f.correlation_id, f.response_code) + U64.pack(f.offset),
    ConsumerUpdate: lambda f: _c(f.correlation_id) + _u8(f.subscription_id)
    + _u8(1 if f.active else 0),
    ConsumerUpdateResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + _spec(f.offset_spec),
    ResolveOffsetSpec: lambda f: _c(f.correlation_id) + _s(f.stream) + _spec(f.offset_spec)
    + _map_if_any(f.properties),
    ResolveOffsetSpecResponse: lambda f: _cc(f.correlation_id, f.response_code)
    + U16.pack(f.offset_type) + U64.pack(f.offset),
}
_RESPONSES: Final = frozenset(
    {PeerPropertiesResponse, SaslHandshakeResponse, SaslAuthenticateResponse, OpenResponse,
     ExchangeCommandVersionsResponse, MetadataResponse, StreamStatsResponse, RouteResponse,
     PartitionsResponse, QueryPublisherSequenceResponse, CreditResponse, QueryOffsetResponse,
     ConsumerUpdateResponse, ResolveOffsetSpecResponse}
)


def encode_deliver_head(
    subscription_id: int, chunk_length: int, committed_chunk_id: int | None = None
) -> bytes:
    """A Deliver frame up to its chunk: write this, then ``chunk_length`` bytes of chunk
    (its header and data entries) from wherever they are, unchanged."""
    if committed_chunk_id is None:
        return _DELIVER_V1.pack(5 + chunk_length, DELIVER, 1, subscription_id)
    return _DELIVER_V2.pack(13 + chunk_length, DELIVER, 2, subscription_id, committed_chunk_id)


def encode(frame: Frame) -> bytes:
    if isinstance(frame, Deliver):
        return encode_deliver_head(
            frame.subscription_id, len(frame.chunk), frame.committed_chunk_id
        ) + frame.chunk
    if isinstance(frame, Response):
        key = frame.key | R
    else:
        key = frame.KEY | R if type(frame) in _RESPONSES else frame.KEY
    if isinstance(frame, Tune) and frame.response:
        key = TUNE | R
    version = frame.version if isinstance(frame, Publish) else 1
    body = _BODIES[type(frame)](frame)
    return _HEAD.pack(4 + len(body), key, version) + body

