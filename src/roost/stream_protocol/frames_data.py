"""Stream protocol frames that move messages and offsets: publishing (DeclarePublisher to
DeletePublisher) and consuming (Subscribe, Deliver, Credit, offsets, ConsumerUpdate,
ResolveOffsetSpec). ``frames.py`` gathers every frame; see its docstring."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from roost.stream_protocol.chunks import SubBatchEntry
from roost.stream_protocol.constants import (
    CONSUMER_UPDATE,
    CREDIT,
    DECLARE_PUBLISHER,
    DELETE_PUBLISHER,
    DELIVER,
    OFFSET_FIRST,
    OFFSET_LAST,
    OFFSET_NEXT,
    OFFSET_NONE,
    OFFSET_OFFSET,
    OFFSET_TIMESTAMP,
    PUBLISH,
    PUBLISH_CONFIRM,
    PUBLISH_ERROR,
    QUERY_OFFSET,
    QUERY_PUBLISHER_SEQUENCE,
    RESOLVE_OFFSET_SPEC,
    STORE_OFFSET,
    SUBSCRIBE,
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


class Publish:
    """``version`` 2 carries a filter value per message; sub-batches exist in 1 only.

    The decoder gives a version 1 frame of non-empty messages with consecutive publishing
    ids (what clients send) as its ``entries`` (``u32 length | message``
    each: the store's chunk-record entries, taken from the frame in one pass) with
    ``first_id`` and ``count``, without an object per message; ``messages`` builds them
    only when asked (a refused frame, tests). Equal frames compare equal either way."""

    __slots__ = ("_messages", "count", "entries", "first_id", "publisher_id", "version")
    KEY: ClassVar[int] = PUBLISH

    def __init__(
        self, publisher_id: int, messages: list[PublishedMessage | PublishedBatch],
        version: int = 1,
    ) -> None:
        self.publisher_id = publisher_id
        self.version = version
        self._messages: list[PublishedMessage | PublishedBatch] | None = messages
        self.entries: bytes | None = None
        self.first_id = 0
        self.count = len(messages)

    @classmethod
    def of_entries(cls, publisher_id: int, first_id: int, count: int, entries: bytes) -> Publish:
        frame = cls(publisher_id, [])
        frame._messages, frame.entries = None, entries
        frame.first_id, frame.count = first_id, count
        return frame

    @property
    def messages(self) -> list[PublishedMessage | PublishedBatch]:
        if self._messages is None:
            data, pos, out = self.entries or b"", 0, []
            for i in range(self.count):
                stop = pos + 4 + int.from_bytes(data[pos : pos + 4], "big")
                out.append(PublishedMessage(self.first_id + i, data[pos + 4 : stop]))
                pos = stop
            self._messages = list(out)
        return self._messages

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Publish):
            return NotImplemented
        return (self.publisher_id, self.version, self.messages) == (
            other.publisher_id, other.version, other.messages)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return f"Publish({self.publisher_id!r}, {self.messages!r}, {self.version!r})"


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
