"""A stream-protocol server made of the codec and asyncio, for real clients: it keeps
streams in memory as chunks (one per Publish frame), confirms publishes, and delivers
chunks built with ``chunks.build_chunk`` from every offset specification. Every frame a
client sends is recorded."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from roost.stream_protocol import codec
from roost.stream_protocol import constants as c
from roost.stream_protocol.chunks import Entry, SimpleEntry, build_chunk
from roost.stream_protocol.frames import (
    Broker,
    Close,
    CommandVersion,
    Create,
    Credit,
    DeclarePublisher,
    Delete,
    DeletePublisher,
    Deliver,
    ExchangeCommandVersions,
    ExchangeCommandVersionsResponse,
    Frame,
    Metadata,
    MetadataResponse,
    OffsetSpec,
    Open,
    OpenResponse,
    PeerProperties,
    PeerPropertiesResponse,
    Publish,
    PublishConfirm,
    PublishedBatch,
    QueryOffset,
    QueryOffsetResponse,
    QueryPublisherSequence,
    QueryPublisherSequenceResponse,
    Response,
    SaslAuthenticate,
    SaslAuthenticateResponse,
    SaslHandshake,
    SaslHandshakeResponse,
    StoreOffset,
    StreamMetadata,
    Subscribe,
    Tune,
    Unsubscribe,
)


@dataclass
class _Stream:
    chunks: list[tuple[int, int, list[Entry]]] = field(default_factory=list)  # id, ts, entries
    next_offset: int = 0
    offsets: dict[str, int] = field(default_factory=dict)
    sequences: dict[str, int] = field(default_factory=dict)


class StubStreamServer:
    def __init__(self) -> None:
        self.streams: dict[str, _Stream] = {}
        self.received: list[Frame] = []
        self.delivered: list[Deliver] = []
        self.errors: list[BaseException] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._subs: list[tuple[asyncio.StreamWriter, int, str]] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = codec.FrameReader(role="server", frame_max=c.DEFAULT_INITIAL_FRAME_MAX)
        publishers: dict[int, tuple[str, str]] = {}
        try:
            while data := await reader.read(65536):
                frames.feed(data)
                for frame in frames.frames():
                    self.received.append(frame)
                    if isinstance(frame, Open):
                        frames.frame_max = c.DEFAULT_FRAME_MAX
                    for out in self._answer(frame, writer, publishers):
                        writer.write(codec.encode(out))
                await writer.drain()
                if writer.is_closing():
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except BaseException as exc:  # the test reports it
            self.errors.append(exc)
        finally:
            self._subs = [s for s in self._subs if s[0] is not writer]
            writer.close()

    def _deliver(self, writer: asyncio.StreamWriter, sub_id: int, chunk_id: int, ts: int,
                 entries: list[Entry]) -> None:
        chunk = build_chunk(entries, chunk_id=chunk_id, timestamp=ts)
        # the way the adapter will send stored chunks: frame head, then the chunk's bytes
        writer.writelines([codec.encode_deliver_head(sub_id, len(chunk)), chunk])
        self.delivered.append(Deliver(sub_id, chunk))

    def _answer(self, f: Frame, writer: asyncio.StreamWriter,
                publishers: dict[int, tuple[str, str]]) -> list[Frame]:
        if isinstance(f, PeerProperties):
            return [PeerPropertiesResponse(f.correlation_id, c.OK, {"product": "stub"})]
        if isinstance(f, SaslHandshake):
            return [SaslHandshakeResponse(f.correlation_id, c.OK, ["PLAIN", "EXTERNAL"])]
        if isinstance(f, SaslAuthenticate):
            return [SaslAuthenticateResponse(f.correlation_id, c.OK),
                    Tune(c.DEFAULT_FRAME_MAX, c.DEFAULT_HEARTBEAT)]
        if isinstance(f, Open):
            advertised = {"advertised_host": "127.0.0.1", "advertised_port": str(self.port)}
            return [OpenResponse(f.correlation_id, c.OK, advertised)]
        if isinstance(f, ExchangeCommandVersions):
            return [ExchangeCommandVersionsResponse(
                f.correlation_id, c.OK,
                [CommandVersion(c.DECLARE_PUBLISHER, 1, 1), CommandVersion(c.PUBLISH, 1, 2)])]
        if isinstance(f, Metadata):
            return [MetadataResponse(
                f.correlation_id, [Broker(0, "127.0.0.1", self.port)],
                [StreamMetadata(s, c.OK, 0) if s in self.streams
                 else StreamMetadata(s, c.STREAM_DOES_NOT_EXIST, 0xFFFF) for s in f.streams])]
        if isinstance(f, Create):
            code = c.STREAM_ALREADY_EXISTS if f.stream in self.streams else c.OK
            self.streams.setdefault(f.stream, _Stream())
            return [Response(c.CREATE, f.correlation_id, code)]
        if isinstance(f, Delete):
            self.streams.pop(f.stream, None)
            return [Response(c.DELETE, f.correlation_id, c.OK)]
        if isinstance(f, DeclarePublisher):
            publishers[f.publisher_id] = (f.stream, f.reference)
            return [Response(c.DECLARE_PUBLISHER, f.correlation_id, c.OK)]
        if isinstance(f, QueryPublisherSequence):
            seq = self.streams[f.stream].sequences.get(f.reference, 0)
            return [QueryPublisherSequenceResponse(f.correlation_id, c.OK, seq)]
        if isinstance(f, Publish):
            return self._publish(f, publishers)
        if isinstance(f, DeletePublisher):
            publishers.pop(f.publisher_id, None)
            return [Response(c.DELETE_PUBLISHER, f.correlation_id, c.OK)]
        if isinstance(f, Subscribe):
            self._subscribe(f, writer)
            return []
        if isinstance(f, Unsubscribe):
            self._subs = [s for s in self._subs if (s[0], s[1]) != (writer, f.subscription_id)]
            return [Response(c.UNSUBSCRIBE, f.correlation_id, c.OK)]
        if isinstance(f, StoreOffset):
            self.streams[f.stream].offsets[f.reference] = f.offset
            return []
        if isinstance(f, QueryOffset):
            stored = self.streams[f.stream].offsets.get(f.reference)
            code = c.NO_OFFSET if stored is None else c.OK
            return [QueryOffsetResponse(f.correlation_id, code, stored or 0)]
        if isinstance(f, Close):
            writer.write(codec.encode(Response(c.CLOSE, f.correlation_id, c.OK)))
            writer.close()
            return []
        if isinstance(f, Tune | Credit):
            return []
        return []

    def _publish(self, f: Publish, publishers: dict[int, tuple[str, str]]) -> list[Frame]:
        stream_name, reference = publishers[f.publisher_id]
        stream = self.streams[stream_name]
        entries: list[Entry] = []
        for m in f.messages:
            entries.append(m.entry if isinstance(m, PublishedBatch) else SimpleEntry(m.data))
            if reference:
                stream.sequences[reference] = m.publishing_id
        if entries:
            chunk_id, ts = stream.next_offset, int(time.time() * 1000)
            stream.chunks.append((chunk_id, ts, entries))
            stream.next_offset += sum(
                1 if isinstance(e, SimpleEntry) else e.record_count for e in entries
            )
            for writer, sub_id, name in self._subs:
                if name == stream_name:
                    self._deliver(writer, sub_id, chunk_id, ts, entries)
        return [PublishConfirm(f.publisher_id, [m.publishing_id for m in f.messages])]

    def _subscribe(self, f: Subscribe, writer: asyncio.StreamWriter) -> None:
        stream = self.streams.get(f.stream)
        if stream is None:
            writer.write(codec.encode(Response(c.SUBSCRIBE, f.correlation_id,
                                               c.STREAM_DOES_NOT_EXIST)))
            return
        writer.write(codec.encode(Response(c.SUBSCRIBE, f.correlation_id, c.OK)))
        spec: OffsetSpec = f.offset_spec
        chunks = stream.chunks
        if spec.type == c.OFFSET_LAST:
            chunks = chunks[-1:]
        elif spec.type == c.OFFSET_NEXT:
            chunks = []
        elif spec.type == c.OFFSET_OFFSET:
            chunks = [ch for i, ch in enumerate(chunks)
                      if i + 1 == len(chunks) or chunks[i + 1][0] > (spec.value or 0)]
        elif spec.type == c.OFFSET_TIMESTAMP:
            chunks = [ch for ch in chunks if ch[1] >= (spec.value or 0)]
        for chunk_id, ts, entries in chunks:
            self._deliver(writer, f.subscription_id, chunk_id, ts, entries)
        self._subs.append((writer, f.subscription_id, f.stream))
