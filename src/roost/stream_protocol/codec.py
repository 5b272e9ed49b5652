"""Sans-IO RabbitMQ stream protocol: ``FrameReader.feed()`` then ``next_frame()``, which
returns a frame (``frames.py``) or ``NEED_DATA``, and ``encode(frame)``.

Framing (PROTOCOL.adoc, "Frame Structure"): ``u32 size`` (not counting itself), then
``u16 key`` (high bit set on a response), ``u16 version`` and the body; most requests
start their body with a ``u32 correlation id`` and most responses follow it with a
``u16 response code``. Command layouts: PROTOCOL.adoc's section of the same name, with
the details the document leaves out taken from the broker's parser and encoder
(rabbit_stream_core.erl) and from the clients (rstream, the Go and Java clients):

- Tune is sent by the server as a request and answered with the response bit set
  (rstream answers without it; both are read);
- Open's response and Subscribe's and ResolveOffsetSpec's properties are left off
  when empty; SaslAuthenticate's empty data is sent as null (-1) and its response's
  challenge, when there is one, has a u16 length;
- Credit's response has no correlation id and comes only on a problem;
- Metadata's response has no response code of its own, one per stream instead;
- Publish version 2 puts a filter value (string, -1 for none) before each message;
  a version 1 message whose length has the high bit set is a sub-batch entry
  (``chunks.py``); Deliver version 2 puts the committed chunk id before the chunk.

Malformed input raises ``StreamProtocolError`` with the code RabbitMQ closes with:

========================================================  ===========================
input                                                     response code
========================================================  ===========================
size above ``frame_max`` (0 = no limit; checked from the  0x0e FRAME_TOO_LARGE
4-byte size, before the body is buffered)
size below 4 (no room for key and version)                0x0d UNKNOWN_FRAME
key or version unknown, or not sent by the peer's role    0x0d UNKNOWN_FRAME
body ends early, or bytes left over                       0x0d UNKNOWN_FRAME
string not UTF-8                                          0x0d UNKNOWN_FRAME
offset specification type not 1-5 (0-5 in ConsumerUpdate  0x0d UNKNOWN_FRAME
answers)
Publish: entry count not matching the entries, a v2       0x0d UNKNOWN_FRAME
message with the sub-batch bit
Deliver: chunk without a 48-byte header of magic 5, or    0x0d UNKNOWN_FRAME
shorter than its data length
========================================================  ===========================

RabbitMQ keeps strings as bytes; Roost's names are text, so a non-UTF-8 string is
refused here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from roost.stream_protocol import wire
from roost.stream_protocol.chunks import (
    ChunkHeader,
    SimpleEntry,
    encode_entry,
    read_entry,
)
from roost.stream_protocol.constants import (
    CHUNK_HEADER_SIZE,
    CLOSE,
    CREATE,
    CREATE_SUPER_STREAM,
    DECLARE_PUBLISHER,
    DELETE,
    DELETE_PUBLISHER,
    DELETE_SUPER_STREAM,
    DELIVER,
    FRAME_TOO_LARGE,
    OFFSET_NONE,
    OFFSET_OFFSET,
    OFFSET_TIMESTAMP,
    RESPONSE_FLAG,
    SUBSCRIBE,
    TUNE,
    UNKNOWN_FRAME,
    UNSUBSCRIBE,
)
from roost.stream_protocol.errors import StreamProtocolError
from roost.stream_protocol.frames import (
    Broker,
    Close,
    CommandVersion,
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
    SaslAuthenticate,
    SaslAuthenticateResponse,
    SaslHandshake,
    SaslHandshakeResponse,
    StoreOffset,
    StreamMetadata,
    StreamStats,
    StreamStatsResponse,
    Subscribe,
    Tune,
    Unsubscribe,
)
from roost.stream_protocol.wire import U16, U32, U64, Reader

__all__ = ["NEED_DATA", "FrameReader", "decode_frame", "encode", "encode_deliver_head"]


class _NeedData:
    """The type of ``NEED_DATA``: more bytes are needed before the next frame."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()
R: Final = RESPONSE_FLAG
_HEAD = struct.Struct(">IHH")
_DELIVER_V1 = struct.Struct(">IHHB")
_DELIVER_V2 = struct.Struct(">IHHBQ")

# -- decoding ----------------------------------------------------------------------------


def _offset_spec(r: Reader, allow_none: bool = False) -> OffsetSpec:
    kind = r.u16("offset type")
    if kind == OFFSET_OFFSET:
        return OffsetSpec(kind, r.u64("offset"))
    if kind == OFFSET_TIMESTAMP:
        return OffsetSpec(kind, r.i64("timestamp"))
    if 1 <= kind <= 3 or (allow_none and kind == OFFSET_NONE):
        return OffsetSpec(kind)
    raise StreamProtocolError(UNKNOWN_FRAME, f"offset specification type {kind}")


def _optional_map(r: Reader, what: str) -> dict[str, str]:
    return r.string_map(what) if r.remaining() else {}


def _publish(version: int) -> Callable[[Reader], Publish]:
    def decode(r: Reader) -> Publish:
        publisher_id = r.u8("publisher id")
        count = r.count("messages")
        messages: list[PublishedMessage | PublishedBatch] = []
        for _ in range(count):
            publishing_id = r.u64("publishing id")
            filter_value = r.nullable_string("filter value") if version == 2 else None
            entry, r.pos = read_entry(r.buf, r.pos)
            if isinstance(entry, SimpleEntry):
                messages.append(PublishedMessage(publishing_id, entry.data, filter_value))
            elif version == 2:
                raise StreamProtocolError(UNKNOWN_FRAME, "sub-batch in a version 2 Publish")
            else:
                messages.append(PublishedBatch(publishing_id, entry))
        return Publish(publisher_id, messages, version)

    return decode


def _deliver(version: int) -> Callable[[Reader], Deliver]:
    def decode(r: Reader) -> Deliver:
        subscription_id = r.u8("subscription id")
        committed = r.u64("committed chunk id") if version == 2 else None
        chunk = r.rest()
        header = ChunkHeader.unpack(chunk)
        if CHUNK_HEADER_SIZE + header.data_length > len(chunk):
            raise StreamProtocolError(UNKNOWN_FRAME, "chunk shorter than its data length")
        return Deliver(subscription_id, chunk, committed)

    return decode


def _metadata_response(r: Reader) -> MetadataResponse:
    corr = r.u32("correlation id")
    brokers = [
        Broker(r.u16("broker reference"), r.string("host"), r.u32("port"))
        for _ in range(r.count("brokers"))
    ]
    streams = []
    for _ in range(r.count("streams")):
        name, code, leader = r.string("stream"), r.u16("response code"), r.u16("leader")
        replicas = [r.u16("replica") for _ in range(r.count("replicas"))]
        streams.append(StreamMetadata(name, code, leader, replicas))
    return MetadataResponse(corr, brokers, streams)


def _command_versions(r: Reader) -> list[CommandVersion]:
    return [
        CommandVersion(r.u16("key"), r.u16("min version"), r.u16("max version"))
        for _ in range(r.count("command versions"))
    ]


def _sasl_response(r: Reader) -> SaslAuthenticateResponse:
    corr, code = r.u32("correlation id"), r.u16("response code")
    challenge = r.raw(r.u16("challenge"), "challenge") if r.remaining() else b""
    return SaslAuthenticateResponse(corr, code, challenge)


def _stats(r: Reader) -> dict[str, int]:
    out: dict[str, int] = {}
    for _ in range(r.count("statistics")):
        key = r.string("statistic")
        out[key] = r.i64("statistic")
    return out


def _corr(r: Reader) -> int:
    return r.u32("correlation id")


_Decoder = Callable[[Reader], Any]
_SIMPLE_RESPONSES: Final = (
    DECLARE_PUBLISHER, DELETE_PUBLISHER, SUBSCRIBE, UNSUBSCRIBE, CREATE, DELETE, CLOSE,
    CREATE_SUPER_STREAM, DELETE_SUPER_STREAM,
)


def _simple_response(key: int) -> _Decoder:
    return lambda r: Response(key, _corr(r), r.u16("response code"))


# (key with the response bit, version) -> decoder, for what each role reads
FROM_CLIENT: Final[dict[tuple[int, int], _Decoder]] = {
    (0x01, 1): lambda r: DeclarePublisher(
        _corr(r), r.u8("publisher id"), r.string("reference"), r.string("stream")
    ),
    (0x02, 1): _publish(1),
    (0x02, 2): _publish(2),
    (0x05, 1): lambda r: QueryPublisherSequence(
        _corr(r), r.string("reference"), r.string("stream")
    ),
    (0x06, 1): lambda r: DeletePublisher(_corr(r), r.u8("publisher id")),
    (0x07, 1): lambda r: Subscribe(
        _corr(r), r.u8("subscription id"), r.string("stream"), _offset_spec(r),
        r.u16("credit"), _optional_map(r, "properties"),
    ),
    (0x09, 1): lambda r: Credit(r.u8("subscription id"), r.u16("credit")),
    (0x0A, 1): lambda r: StoreOffset(r.string("reference"), r.string("stream"), r.u64("offset")),
    (0x0B, 1): lambda r: QueryOffset(_corr(r), r.string("reference"), r.string("stream")),
    (0x0C, 1): lambda r: Unsubscribe(_corr(r), r.u8("subscription id")),
    (0x0D, 1): lambda r: Create(_corr(r), r.string("stream"), r.string_map("arguments")),
    (0x0E, 1): lambda r: Delete(_corr(r), r.string("stream")),
    (0x0F, 1): lambda r: Metadata(_corr(r), r.strings("streams")),
    (0x11, 1): lambda r: PeerProperties(_corr(r), r.string_map("peer properties")),
    (0x12, 1): lambda r: SaslHandshake(_corr(r)),
    (0x13, 1): lambda r: SaslAuthenticate(_corr(r), r.string("mechanism"), r.data("SASL data")),
    (0x14, 1): lambda r: Tune(r.u32("frame max"), r.u32("heartbeat"), response=False),
    (0x14 | R, 1): lambda r: Tune(r.u32("frame max"), r.u32("heartbeat"), response=True),
    (0x15, 1): lambda r: Open(_corr(r), r.string("virtual host")),
    (0x16, 1): lambda r: Close(_corr(r), r.u16("closing code"), r.string("closing reason")),
    (0x16 | R, 1): _simple_response(CLOSE),
    (0x17, 1): lambda r: Heartbeat(),
    (0x18, 1): lambda r: Route(_corr(r), r.string("routing key"), r.string("super stream")),
    (0x19, 1): lambda r: Partitions(_corr(r), r.string("super stream")),
    (0x1A | R, 1): lambda r: ConsumerUpdateResponse(
        _corr(r), r.u16("response code"), _offset_spec(r, allow_none=True)
    ),
    (0x1B, 1): lambda r: ExchangeCommandVersions(_corr(r), _command_versions(r)),
    (0x1C, 1): lambda r: StreamStats(_corr(r), r.string("stream")),
    (0x1D, 1): lambda r: CreateSuperStream(
        _corr(r), r.string("super stream"), r.strings("partitions"), r.strings("binding keys"),
        r.string_map("arguments"),
    ),
    (0x1E, 1): lambda r: DeleteSuperStream(_corr(r), r.string("super stream")),
    (0x1F, 1): lambda r: ResolveOffsetSpec(
        _corr(r), r.string("stream"), _offset_spec(r), _optional_map(r, "properties")
    ),
}

FROM_SERVER: Final[dict[tuple[int, int], _Decoder]] = {
    **{(key | R, 1): _simple_response(key) for key in _SIMPLE_RESPONSES},
    (0x03, 1): lambda r: PublishConfirm(
        r.u8("publisher id"), [r.u64("publishing id") for _ in range(r.count("ids"))]
    ),
    (0x04, 1): lambda r: PublishError(
        r.u8("publisher id"),
        [(r.u64("publishing id"), r.u16("code")) for _ in range(r.count("errors"))],
    ),
    (0x05 | R, 1): lambda r: QueryPublisherSequenceResponse(
        _corr(r), r.u16("response code"), r.u64("sequence")
    ),
    (0x08, 1): _deliver(1),
    (0x08, 2): _deliver(2),
    (0x09 | R, 1): lambda r: CreditResponse(r.u16("response code"), r.u8("subscription id")),
    (0x0B | R, 1): lambda r: QueryOffsetResponse(_corr(r), r.u16("response code"), r.u64("offset")),
    (0x0F | R, 1): _metadata_response,
    (0x10, 1): lambda r: MetadataUpdate(r.u16("code"), r.string("stream")),
    (0x11 | R, 1): lambda r: PeerPropertiesResponse(
        _corr(r), r.u16("response code"), r.string_map("peer properties")
    ),
    (0x12 | R, 1): lambda r: SaslHandshakeResponse(
        _corr(r), r.u16("response code"), r.strings("mechanisms")
    ),
    (0x13 | R, 1): _sasl_response,
    (0x14, 1): lambda r: Tune(r.u32("frame max"), r.u32("heartbeat")),
    (0x15 | R, 1): lambda r: OpenResponse(
        _corr(r), r.u16("response code"), _optional_map(r, "connection properties")
    ),
    (0x16, 1): lambda r: Close(_corr(r), r.u16("closing code"), r.string("closing reason")),
    (0x17, 1): lambda r: Heartbeat(),
    (0x18 | R, 1): lambda r: RouteResponse(_corr(r), r.u16("response code"), r.strings("streams")),
    (0x19 | R, 1): lambda r: PartitionsResponse(
        _corr(r), r.u16("response code"), r.strings("streams")
    ),
    (0x1A, 1): lambda r: ConsumerUpdate(_corr(r), r.u8("subscription id"), bool(r.u8("active"))),
    (0x1B | R, 1): lambda r: ExchangeCommandVersionsResponse(
        _corr(r), r.u16("response code"), _command_versions(r)
    ),
    (0x1C | R, 1): lambda r: StreamStatsResponse(_corr(r), r.u16("response code"), _stats(r)),
    (0x1F | R, 1): lambda r: ResolveOffsetSpecResponse(
        _corr(r), r.u16("response code"), r.u16("offset type"), r.u64("offset")
    ),
}


def decode_frame(body: bytes | memoryview, role: str = "server") -> Frame:
    """One frame from the bytes after its size (key, version and body)."""
    table = FROM_CLIENT if role == "server" else FROM_SERVER
    if len(body) < 4:
        raise StreamProtocolError(UNKNOWN_FRAME, f"frame of {len(body)} bytes")
    key, version = U16.unpack_from(body, 0)[0], U16.unpack_from(body, 2)[0]
    decoder = table.get((key, version))
    if decoder is None:
        raise StreamProtocolError(UNKNOWN_FRAME, f"unknown key 0x{key:04x} version {version}")
    r = Reader(body, 4)
    frame: Frame = decoder(r)
    r.done(type(frame).__name__)
    return frame


class FrameReader:
    """Incremental reader of one connection's frames. ``frame_max`` (0: no limit) is
    the largest size field accepted; the session lowers it before Open succeeds and
    sets the tuned value after, as RabbitMQ does."""

    def __init__(self, *, role: str = "server", frame_max: int = 0) -> None:
        if role not in ("server", "client"):
            raise ValueError(f"role must be 'server' or 'client', not {role!r}")
        self.role = role
        self.frame_max = frame_max
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_frame(self) -> Frame | _NeedData:
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            return NEED_DATA
        (size,) = U32.unpack_from(buf, pos)
        if self.frame_max and size > self.frame_max:
            raise StreamProtocolError(
                FRAME_TOO_LARGE, f"frame of {size} bytes above frame_max {self.frame_max}"
            )
        end = pos + 4 + size
        if len(buf) < end:
            return NEED_DATA
        body = bytes(buf[pos + 4 : end])
        self._pos = end
        if end > 65_536 and end * 2 > len(buf):  # keep the buffer from growing forever
            del buf[:end]
            self._pos = 0
        return decode_frame(body, self.role)

    def frames(self) -> list[Frame]:
        out: list[Frame] = []
        while True:
            frame = self.next_frame()
            if isinstance(frame, _NeedData):
                return out
            out.append(frame)


# -- encoding ----------------------------------------------------------------------------


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

