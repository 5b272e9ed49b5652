"""A message as a stream record's payload, in the store's own explicit encoding (a codec
shared by the store, which writes and reads it, and the adapters and Spark source that
read or write it directly: chunked reads, batched publishes; stdlib only, no I/O).

``u16 exchange | u16 routing key | properties | body``: strings are a u16 length and
UTF-8, the properties are ``codec.encode_properties`` (a u16 mask of the ones set, then
their values; header tables as tagged values), exactly as the classic-queue store writes
them; the body is the rest. No pickle: a record decodes to plain values only.

Streams written before this encoding (properties pickled) are not readable by it.

A batched publish (content type ``BATCH_CONTENT_TYPE``, docs/streams.md) carries many
messages for one stream in one body: per message ``u32 length | properties | body``
(big-endian length of the rest; properties encoded as here), so the broker stores each
as a record without decoding or re-encoding its body.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from roost.codecs.properties import (
    CodecError,
    decode_properties,
    encode_properties,
    encode_str,
)

BATCH_CONTENT_TYPE: Final = "application/x-roost-stream-batch"
BATCH_LENGTH: Final = struct.Struct(">I")

# what decoding a malformed payload raises, turned into CodecError
_MALFORMED = (IndexError, KeyError, struct.error, ValueError, ArithmeticError, RecursionError)


def message_prefix(exchange: str, routing_key: str) -> bytes:
    """What a payload holds before its properties: the exchange and the routing key."""
    return encode_str(exchange) + encode_str(routing_key)


def encode_stream_message(
    exchange: str, routing_key: str, properties: tuple[Any, ...], body: bytes
) -> bytes:
    return b"".join((message_prefix(exchange, routing_key), encode_properties(properties), body))


def decode_stream_message(payload: bytes) -> tuple[str, str, tuple[Any, ...], bytes]:
    """(exchange, routing key, the fourteen properties, body); CodecError if malformed."""
    try:
        # the two names inline (this runs once per delivery); read_str's bounds check is
        # the slice's length check here
        end = 2 + (payload[0] << 8 | payload[1])
        exchange = payload[2:end].decode("utf-8")
        pos = end + 2
        end = pos + (payload[end] << 8 | payload[end + 1])
        routing_key = payload[pos:end].decode("utf-8")
        if end > len(payload):
            raise CodecError("routing key runs past the record")
        properties, pos = decode_properties(payload, end)
    except _MALFORMED as exc:
        raise CodecError(str(exc)) from None
    if pos > len(payload):
        raise CodecError("stream record shorter than its properties")
    return exchange, routing_key, properties, payload[pos:]


class RunDecoder:
    """``decode_stream_message`` for a run of records read in bulk (chunked reads): the
    message is decoded where it lies in ``data`` (no copy of the record first), and while
    consecutive records carry the same property bytes their decoded properties are reused.
    The encoding is self-delimiting, so equal bytes at the start decode to equal values
    that end at the same place. The properties (headers dict included) are therefore
    shared between records: callers must not modify them."""

    __slots__ = ("_props", "_raw")

    def __init__(self) -> None:
        self._raw = b""
        self._props: tuple[Any, ...] = ()

    def decode(self, data: bytes, start: int, end: int) -> tuple[str, str, tuple[Any, ...], bytes]:
        try:
            pos = start + 2
            stop = pos + (data[start] << 8 | data[start + 1])
            exchange = data[pos:stop].decode("utf-8")
            pos = stop + 2
            stop = pos + (data[stop] << 8 | data[stop + 1])
            routing_key = data[pos:stop].decode("utf-8")
            raw = self._raw
            if raw and data.startswith(raw, stop):
                properties, pos = self._props, stop + len(raw)
            else:
                properties, pos = decode_properties(data, stop)
                self._raw, self._props = data[stop:pos], properties
        except _MALFORMED as exc:
            raise CodecError(str(exc)) from None
        if pos > end:
            raise CodecError("stream record shorter than its properties")
        return exchange, routing_key, properties, data[pos:end]


def batch_properties(properties: tuple[Any, ...]) -> bytes:
    """The properties part of a batch entry: a writer whose messages repeat properties
    encodes them once and lays out entries itself (see ``batch_entry``)."""
    return encode_properties(properties)


def batch_entry(properties: tuple[Any, ...], body: bytes) -> bytes:
    """One message of a batched publish."""
    props = encode_properties(properties)
    return BATCH_LENGTH.pack(len(props) + len(body)) + props + body


def already_stored(last: int | None, first_id: int, count: int) -> int:
    """How many leading messages of a batch (publishing ids ``first_id`` upwards) a
    deduplicating producer whose last stored id is ``last`` has already stored."""
    return 0 if last is None else min(max(last - first_id + 1, 0), count)


def split_batch(data: bytes) -> list[memoryview]:
    """The messages of a batched publish (properties and body, as a record's payload
    holds them after its exchange and routing key), each checked to decode; CodecError
    for a malformed batch, before anything is stored. Properties equal to the previous
    entry's (byte for byte) are not decoded again."""
    view = memoryview(data)
    entries: list[memoryview] = []
    unpack, size, pos, n = BATCH_LENGTH.unpack_from, BATCH_LENGTH.size, 0, len(data)
    raw = b""
    while pos < n:
        if pos + size > n:
            raise CodecError(f"batch cut inside the length of the entry at byte {pos}")
        start = pos + size
        end = start + unpack(data, pos)[0]
        if end > n:
            raise CodecError(f"batch cut inside the entry at byte {pos}")
        if not (raw and data.startswith(raw, start) and start + len(raw) <= end):
            try:
                _, stop = decode_properties(data, start)
            except _MALFORMED as exc:
                raise CodecError(f"entry at byte {pos}: {exc}") from None
            if stop > end:
                raise CodecError(f"entry at byte {pos} is shorter than its properties")
            raw = data[start:stop]
        entries.append(view[start:end])
        pos = end
    return entries
