"""Stored records to Deliver chunks: a subscription asks the stream queue for chunked
deliveries (consumer argument ``x-roost-chunk-bytes``, docs/streams.md), so the core
hands over a run of records as the store keeps them in ONE delivery, and this module
turns the run into osiris chunks (``chunks.py``) without building a message per record.

Before, each message went through the core on its own (an entry, the session's
bookkeeping, headers for its offset and timestamp) and was then re-encoded, which
bench/stream_protocol_bench.py showed was most of the broker's consume time. Here a
record costs a header unpack, the store decoder's property run check (``RunDecoder``
decodes properties only when their bytes change) and one length prefix: the common
shapes (a body alone, bytes kept as a stream client sent them) need no AMQP 1.0 encoder.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, Final

from roost.codecs.chunk_layout import CHUNK_FLAG, NAME_MASK, osiris_start
from roost.codecs.stream_message import RunDecoder
from roost.core import Message, Properties
from roost.stream_protocol.constants import CHUNK_MAGIC_VERSION, CHUNK_USER, DELIVER

# a stored record: crc32, length of what follows the first 8 bytes, offset, timestamp
# (ms), publishing id, producer name length; then the name and the message (docs/streams.md)
_RECORD: Final = struct.Struct("<IIQqqH")
_HEADER: Final = struct.Struct(">BBHIqQQIIIB3x")  # chunks.py: the osiris chunk header
# a Deliver (version 1) up to its chunk: frame size, key, version, subscription id
_DELIVER: Final = struct.Struct(">IHHB")
_HEAD_SIZE: Final = _DELIVER.size + _HEADER.size
_COPY_BELOW: Final = 512  # a shorter body is sliced (copied); a longer one is a view
_U32: Final = struct.Struct(">I")
# AMQP 1.0 for "one data section" (amqp10.encode_data), with the entry's length first
_SMALL_DATA: Final = [_U32.pack(n + 5) + bytes((0x00, 0x53, 0x75, 0xA0, n)) for n in range(256)]
_BIG_DATA: Final = b"\x00\x53\x75\xb0"

# a built Deliver: one frame, or a stored chunk's Deliver head and a view of the chunk
Built = bytes | tuple[bytes, memoryview]

PLAIN, RAW, FULL = 0, 1, 2  # how a record's properties become a stream client's message
# properties a stream client reads back (consumers.payload): none set means a body alone
_MAPPED: Final = (0, 1, 5, 6, 8, 9, 10, 11)  # content type/encoding, correlation id,
# reply-to, message id, timestamp, type, user id (core.message.PROPERTY_NAMES order)


def shape(properties: tuple[Any, ...], raw_header: str, internal: frozenset[str]) -> int:
    """PLAIN when the client reads just the body as a data section, RAW when the body is
    the bytes a stream client published, FULL otherwise (``consumers.payload``)."""
    headers = properties[2]
    if headers and headers.get(raw_header) is True:
        return RAW
    if headers and any(k not in internal for k in headers):
        return FULL
    return FULL if any(properties[i] is not None for i in _MAPPED) else PLAIN


class ChunkBuilder:
    """Osiris chunks of at most ``max_bytes`` of entries and ``max_messages`` messages
    from runs of stored records; one builder per subscription (its decoder remembers
    the last properties)."""

    __slots__ = ("_decode", "_filter_header", "_full", "_internal", "_keep", "_meta", "_names",
                 "_only", "_props", "_raw", "_shape", "_unfiltered", "max_bytes", "max_messages")

    def __init__(
        self,
        max_bytes: int,
        max_messages: int,
        *,
        full: Any,
        raw_header: str,
        internal: frozenset[str],
        only: frozenset[str] | None = None,
        unfiltered: bool = False,
        filter_header: str = "",
    ) -> None:
        self.max_bytes = max_bytes
        self.max_messages = max_messages
        self._decode = RunDecoder().decode
        self._full = full  # (Message) -> bytes: consumers.payload
        self._raw = raw_header
        self._internal = internal
        # a filtering subscription (Subscribe's filter.N, match-unfiltered): the messages
        # whose filter value is one of ``only`` (without one: when ``unfiltered``) pass
        self._only = only
        self._unfiltered = unfiltered
        self._filter_header = filter_header
        self._keep = True
        self._props: tuple[Any, ...] = ()
        self._shape = PLAIN
        # the last record's bytes before its body (exchange, routing key, properties) and
        # those names: a record starting with the same bytes has the same properties
        self._meta = b""
        self._names = ("", "")

    def _passes(self, properties: tuple[Any, ...]) -> bool:
        """Whether a message with these properties passes the subscription's filter."""
        if self._only is None:
            return True
        headers = properties[2]
        value = headers.get(self._filter_header) if headers else None
        if value is None:
            return self._unfiltered
        return str(value) in self._only

    def build(self, data: bytes, subscription_id: int, start_offset: int = 0) -> list[Built]:
        """Whole Deliver frames (frame head, chunk header, data entries) for every record
        in ``data`` from ``start_offset``, in offset order: each is joined once and
        written as it is. A chunk record (store/stream_chunk.py) that fits goes as it is
        stored: the Deliver head and a view of the stored bytes, written as they are (no
        copy in user space: the plumbing hands views to the socket with writev)."""
        unpack, size, pos, n = _RECORD.unpack_from, _RECORD.size, 0, len(data)
        view = memoryview(data)
        decode, small, pack = self._decode, _SMALL_DATA, _U32.pack
        max_bytes, max_messages = self.max_bytes, self.max_messages
        out: list[Built] = []
        parts: list[Any] = [_HEAD_ROOM]
        count = length = first = ts = 0
        meta, kind = self._meta, self._shape
        while pos < n:
            _crc, rest, offset, timestamp, _pid, name_length = unpack(data, pos)
            end = pos + 8 + rest
            start = pos + size + (name_length & NAME_MASK)
            pos = end
            if name_length & CHUNK_FLAG:
                if self._only is not None and not self._unfiltered:
                    continue  # its messages have no filter value
                at = osiris_start(data, start)
                entries = _U32.unpack_from(data, at + 4)[0]
                if offset >= start_offset and entries <= max_messages and end - at <= max_bytes:
                    if count:
                        out.append(_frame(parts, subscription_id, count, first, ts, length))
                        parts, count, length = [_HEAD_ROOM], 0, 0
                    out.append((_DELIVER.pack(5 + end - at, DELIVER, 1, subscription_id),
                                view[at:end]))
                    continue
                # too big for this connection's frames, or a subscription starting inside
                # it: its entries (u32 length and message each) go as other records' do
                at += _HEADER.size
                while at < end:
                    stop = at + 4 + _U32.unpack_from(data, at)[0]
                    if offset >= start_offset:
                        grow = stop - at
                        if count and (count >= max_messages or length + grow > max_bytes):
                            out.append(_frame(parts, subscription_id, count, first, ts, length))
                            parts, count, length = [_HEAD_ROOM], 0, 0
                        if not count:
                            first, ts = offset, timestamp
                        parts.append(view[at:stop])
                        count += 1
                        length += grow
                    offset += 1
                    at = stop
                continue
            if meta and data.startswith(meta, start) and start + len(meta) <= end:
                # same names and properties as before
                begin = start + len(meta)
                body = data[begin:end] if end - begin < _COPY_BELOW else view[begin:end]
            else:
                exchange, routing_key, props, body = decode(data, start, end)
                meta = data[start : end - len(body)]
                self._names = (exchange, routing_key)
                self._props = props
                self._shape = shape(props, self._raw, self._internal)
                kind = self._shape
                self._keep = self._passes(props)
            if not self._keep:
                continue
            if kind == PLAIN:
                if len(body) < 256:
                    head = small[len(body)]
                else:
                    head = pack(len(body) + 8) + _BIG_DATA + pack(len(body))
            elif kind == RAW:
                head = pack(len(body))
            else:
                message = Message(*self._names, Properties(*self._props), bytes(body))
                body = self._full(message)
                head = pack(len(body))
            grow = len(head) + len(body)
            if count and (count >= max_messages or length + grow > max_bytes):
                out.append(_frame(parts, subscription_id, count, first, ts, length))
                parts, count, length = [_HEAD_ROOM], 0, 0
            if not count:
                first, ts = offset, timestamp
            parts.append(head)
            parts.append(body)
            count += 1
            length += grow
        if count:
            out.append(_frame(parts, subscription_id, count, first, ts, length))
        self._meta = meta
        return out


_HEAD_ROOM: Final = bytes(_HEAD_SIZE)


def _frame(
    parts: list[Any], subscription_id: int, count: int, first: int, timestamp: int, length: int
) -> bytes:
    """The Deliver frame of ``parts`` (``_HEAD_ROOM`` then the entries): one join, then
    the frame head and chunk header written over the room left for them."""
    frame = bytearray().join(parts)
    crc = zlib.crc32(memoryview(frame)[_HEAD_SIZE:])
    _DELIVER.pack_into(frame, 0, len(frame) - 4, DELIVER, 1, subscription_id)
    _HEADER.pack_into(
        frame, _DELIVER.size, CHUNK_MAGIC_VERSION, CHUNK_USER, count, count, timestamp, 0,
        first, crc, length, 0, 0,
    )
    return bytes(frame)  # one copy per chunk, so writers take it as bytes
