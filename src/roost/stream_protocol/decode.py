"""Decoders of every stream protocol frame, by role (what a client sends, what a server
sends), and the response code each kind of malformed input raises.

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

from roost.stream_protocol.chunks import (
    ChunkHeader,
    SimpleEntry,
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
    OFFSET_NONE,
    OFFSET_OFFSET,
    OFFSET_TIMESTAMP,
    RESPONSE_FLAG,
    SUBSCRIBE,
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
from roost.stream_protocol.wire import U16, Reader

# a Publish entry's publishing id and (simple entry) length, read in one unpack
_ID_AND_SIZE: Final = struct.Struct(">QI")

R: Final = RESPONSE_FLAG


def _offset_spec(r: Reader, allow_none: bool = False) -> OffsetSpec:
    kind = r.u16("offset type")
    if kind == OFFSET_OFFSET:
        return OffsetSpec(kind, r.u64("offset"))
    if kind == OFFSET_TIMESTAMP:
        return OffsetSpec(kind, r.i64("timestamp"))
    if 1 <= kind <= 3 or (allow_none and kind == OFFSET_NONE):
        return OffsetSpec(kind)
    raise StreamProtocolError(UNKNOWN_FRAME, f"offset specification type {kind}")


def _consumer_update_response(r: Reader) -> ConsumerUpdateResponse:
    """rstream (1.1) sends a u64 offset after every offset type, even those without a
    value (first, last, next, none): read and dropped, as RabbitMQ accepts it."""
    frame = ConsumerUpdateResponse(
        _corr(r), r.u16("response code"), _offset_spec(r, allow_none=True)
    )
    if frame.offset_spec.value is None and r.remaining() == 8:
        r.u64("unused offset")
    return frame


def _optional_map(r: Reader, what: str) -> dict[str, str]:
    return r.string_map(what) if r.remaining() else {}


def _publish_entries(r: Reader, publisher_id: int, count: int) -> Publish | None:
    """A version 1 Publish of non-empty messages with consecutive ids (one or more) as its
    entries (``Publish.of_entries``): one pass, the ``u32 length | message`` of each
    sliced from the frame and joined once; None for any other frame (decoded in full)."""
    buf, pos, end, unpack = r.buf, r.pos, r.end, _ID_AND_SIZE.unpack_from
    if count < 1 or pos + 12 > end:
        return None
    first = unpack(buf, pos)[0]
    parts = []
    for i in range(count):
        if pos + 12 > end:
            return None
        publishing_id, size = unpack(buf, pos)
        stop = pos + 12 + size
        if publishing_id != first + i or size & 0x8000_0000 or not size or stop > end:
            return None
        parts.append(buf[pos + 8 : stop])
        pos = stop
    r.pos = pos
    return Publish.of_entries(publisher_id, first, count, b"".join(parts))


def _publish(version: int) -> Callable[[Reader], Publish]:
    def decode(r: Reader) -> Publish:
        publisher_id = r.u8("publisher id")
        count = r.count("messages")
        if version == 1:
            fast = _publish_entries(r, publisher_id, count)
            if fast is not None:
                return fast
        messages: list[PublishedMessage | PublishedBatch] = []
        buf, end, unpack = r.buf, r.end, _ID_AND_SIZE.unpack_from
        for _ in range(count):
            pos = r.pos
            if version == 1 and pos + 12 <= end:  # the common entry, without the Reader
                publishing_id, size = unpack(buf, pos)
                stop = pos + 12 + size
                if not size & 0x8000_0000 and stop <= end:
                    messages.append(PublishedMessage(publishing_id, bytes(buf[pos + 12 : stop])))
                    r.pos = stop
                    continue
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
    (0x1A | R, 1): lambda r: _consumer_update_response(r),
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

