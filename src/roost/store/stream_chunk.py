"""Chunk records: a stream-protocol Publish frame's messages stored as ONE log record in
the stream protocol's own wire format (an osiris chunk), so that a stream-protocol
consumer's Deliver is a 9-byte head plus the stored bytes, one slice per chunk.

A chunk record has the common record header (stream_log.py) with bit ``CHUNK_FLAG`` of
the producer name's length set: names never exceed 255 bytes, so no record written
without this kind has the bit, and old data directories read as before (no migration).
Its offset is the first message's, its publishing id the last message's (ids are
consecutive). Its payload::

    u16 exchange | u16 routing key | osiris chunk header (48 bytes) | entries

The header is the one a Deliver carries (stream_protocol/chunks.py has the layout: user
chunk, entry and record count, timestamp, epoch 0, first offset, CRC-32 and length of
the entries). Each entry is ``u32 length | message``, the message exactly as the stream
client sent it. Two shapes need no AMQP 1.0 decoder for an AMQP, STOMP or Spark reader:
one AMQP 1.0 data section, and bytes that are not AMQP 1.0 (first byte not 0x00). Any
other AMQP 1.0 message (properties, application properties, several sections) is kept
as sent too, as RabbitMQ keeps it, and mapped when such a reader asks, by the stream
adapter's mapping, which the server registers (``map_amqp10_with``, server_storage.py):
the store knows no AMQP 1.0. Those readers get the chunk expanded into one record per
message (``expand``), with the properties the stream adapter gives the same messages
when it stores them one by one.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any, Final

from roost.codecs.chunk_layout import CHUNK_FLAG, NAME_MASK, osiris_start
from roost.codecs.properties import CodecError, encode_properties

# the header marking a body kept exactly as a stream client sent it (not AMQP 1.0)
RAW_HEADER: Final = "x-roost-stream-raw"
OSIRIS_HEADER: Final = struct.Struct(">BBHIqQQIIIB3x")
_MAGIC_VERSION: Final = 0x50
_U32: Final = struct.Struct(">I")
# the records of a stream log: crc32, length after crc+length, offset, ts, pub id, name len
_RECORD: Final = struct.Struct("<IIQqqH")
_CRC: Final = struct.Struct("<I")
MAX_ENTRIES: Final = 0xFFFF  # the osiris header counts entries in a u16

# the fourteen properties (core.message.PROPERTY_NAMES order) of the two shapes:
# delivery mode 2, and for raw bytes the RAW_HEADER
PLAIN_PROPERTIES: Final = encode_properties((None, None, None, 2, *(None,) * 10))
RAW_PROPERTIES: Final = encode_properties((None, None, {RAW_HEADER: True}, 2, *(None,) * 10))


def data_body(message: bytes | memoryview, start: int, end: int) -> int:
    """Where the body of a single AMQP 1.0 data section in ``message[start:end]``
    starts; -1 when it is not one."""
    if end - start < 5 or message[start : start + 3] != b"\x00Su":
        return -1
    code = message[start + 3]
    if code == 0xA0 and end - start == 5 + message[start + 4]:
        return start + 5
    if code == 0xB0 and end - start >= 8 and end - start == 8 + _U32.unpack_from(
        message, start + 4
    )[0]:
        return start + 8
    return -1


Amqp10Mapping = Callable[[bytes], tuple[tuple[Any, ...], bytes]]
# (message) -> (the fourteen properties, body) of an AMQP 1.0 message that is not one
# data section; the stream adapter's (publishers.py), registered by the server as it
# builds the store (server_storage.py)
_amqp10: Final[list[Amqp10Mapping]] = []
Amqp10Encoding = Callable[[bytes], tuple[bytes, bytes]]
# (message) -> (the same properties in the store's encoding, body): what a read of a
# chunk record asks for every such message (stream_protocol/chunk_mapping.py)
_amqp10_encoded: Final[list[Amqp10Encoding]] = []


def map_amqp10_with(mapping: Amqp10Mapping, encoded: Amqp10Encoding | None = None) -> None:
    """Register how a general AMQP 1.0 message of a chunk record maps onto properties
    and a body (the stream adapter's mapping, the one it stores other messages with),
    and ``encoded``: the same mapping straight to the store's encoding of properties."""
    _amqp10[:] = [mapping]
    _amqp10_encoded[:] = [encoded or (lambda m: _encode_mapped(mapping, m))]


def _encode_mapped(mapping: Amqp10Mapping, message: bytes) -> tuple[bytes, bytes]:
    properties, body = mapping(message)
    return encode_properties(properties), body


def message_values(message: bytes) -> tuple[tuple[Any, ...], bytes]:
    """The fourteen properties and the body a message of a chunk record stands for."""
    body_at = data_body(message, 0, len(message)) if message[0] == 0 else -1
    if body_at >= 0:
        return (None, None, None, 2, *(None,) * 10), message[body_at:]
    if message[0] == 0 and _amqp10:
        return _amqp10[0](message)
    return (None, None, {RAW_HEADER: True}, 2, *(None,) * 10), message


def split_entries(data: bytes) -> list[memoryview]:
    """The entries (each with its length) of an entries publish, each checked to be
    whole and not empty; CodecError before anything is stored."""
    view = memoryview(data)
    out: list[memoryview] = []
    pos, n = 0, len(data)
    while pos < n:
        if pos + 4 > n:
            raise CodecError(f"entries cut inside the length at byte {pos}")
        start = pos + 4
        end = start + _U32.unpack_from(data, pos)[0]
        if end > n or end == start:
            raise CodecError(f"entry at byte {pos} is empty or cut")
        out.append(view[pos:end])
        pos = end
    if len(out) > MAX_ENTRIES:
        raise CodecError(f"{len(out)} entries: a chunk holds at most {MAX_ENTRIES}")
    return out


def chunk_record(
    offset: int,
    timestamp_ms: int,
    last_id: int,
    name: bytes,
    prefix: bytes,
    data: bytes | memoryview,
    count: int,
) -> bytes:
    """The whole record (header, name, payload) for ``count`` entries, ``data``, starting
    at ``offset``. The record's CRC covers everything up to the entries: the osiris
    header's own CRC covers them (one pass over the messages, not two); recovery checks
    both (``intact``)."""
    head = OSIRIS_HEADER.pack(
        _MAGIC_VERSION, 0, count, count, timestamp_ms, 0, offset, zlib.crc32(data),
        len(data), 0, 0,
    )
    length = _RECORD.size - 8 + len(name) + len(prefix) + len(head) + len(data)
    rec = _RECORD.pack(0, length, offset, timestamp_ms, last_id, len(name) | CHUNK_FLAG)[4:]
    crc = zlib.crc32(head, zlib.crc32(prefix, zlib.crc32(name, zlib.crc32(rec))))
    return b"".join((_CRC.pack(crc), rec, name, prefix, head, data))


def intact(data: bytes | memoryview, pos: int, end: int, crc: int, payload: int) -> bool:
    """Whether the chunk record at ``pos`` (payload at ``payload``, ending at ``end``)
    is whole: its CRC (up to the entries) and the osiris header's (the entries)."""
    at = osiris_start(data, payload) + OSIRIS_HEADER.size
    if at > end or zlib.crc32(memoryview(data)[pos + 4 : at]) != crc:
        return False
    stored: int = _U32.unpack_from(data, at - 16)[0]
    return zlib.crc32(memoryview(data)[at:end]) == stored


def messages(data: bytes, payload: int, end: int) -> list[tuple[bytes, bytes]]:
    """Each message of a chunk record as (properties, body) in the store's message
    encoding (codecs/stream_message.py); the exchange and routing key are the payload's first
    bytes, up to ``osiris_start``."""
    pos = osiris_start(data, payload) + OSIRIS_HEADER.size
    out: list[tuple[bytes, bytes]] = []
    while pos < end:
        start = pos + 4
        stop = start + _U32.unpack_from(data, pos)[0]
        body = data_body(data, start, stop) if data[start] == 0 else -1
        if body >= 0:
            out.append((PLAIN_PROPERTIES, data[body:stop]))
        elif data[start] == 0 and _amqp10_encoded:
            out.append(_amqp10_encoded[0](data[start:stop]))
        else:
            out.append((RAW_PROPERTIES, data[start:stop]))
        pos = stop
    return out


def expand(data: bytes, pos: int, first: int, end: int | None) -> list[tuple[int, Any]]:
    """The chunk record at ``pos`` as plain records (the common layout, CRC 0, as a
    chunked read hands records out): (offset, record bytes) for offsets from ``first``
    and before ``end``."""
    _crc, length, offset, ts, last_id, nlen = _RECORD.unpack_from(data, pos)
    nlen &= NAME_MASK
    name_at = pos + _RECORD.size
    name = data[name_at : name_at + nlen]
    payload = name_at + nlen
    prefix = data[payload : osiris_start(data, payload)]
    found = messages(data, payload, pos + 8 + length)
    first_id = last_id - len(found) + 1 if name else 0
    out: list[tuple[int, Any]] = []
    for i, (props, body) in enumerate(found):
        o = offset + i
        if o < first or (end is not None and o >= end):
            continue
        size = _RECORD.size - 8 + nlen + len(prefix) + len(props) + len(body)
        head = _RECORD.pack(0, size, o, ts, first_id + i if name else 0, nlen)
        out.append((o, b"".join((head, name, prefix, props, body))))
    return out


def plain_run(data: bytes, first: int, end: int | None) -> tuple[bytes, int, int]:
    """A run of stored records as plain records only (chunk records expanded, messages
    before ``first`` or from ``end`` left out): (records, count, last offset), for
    readers that decode records themselves (chunked AMQP reads: the Spark source). A run
    without chunk records comes back as it is."""
    unpack, pos, n = _RECORD.unpack_from, 0, len(data)
    parts: list[Any] = []
    keep = 0  # where the plain records not yet in ``parts`` start
    count, last = 0, first - 1
    chunked = False
    while pos < n:
        _crc, length, offset, _ts, _pid, nlen = unpack(data, pos)
        rec_end = pos + 8 + length
        if nlen & CHUNK_FLAG:
            chunked = True
            parts.append(data[keep:pos])
            for o, record in expand(data, pos, first, end):
                parts.append(record)
                count += 1
                last = o
            keep = rec_end
        else:
            count += 1
            last = offset
        pos = rec_end
    if not chunked:
        return data, count, last
    parts.append(data[keep:])
    return b"".join(parts), count, last
