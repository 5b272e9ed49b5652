"""Osiris chunks, the unit a Deliver frame carries (osiris_log.erl, "Chunk format"):

    48-byte header | bloom filter (bloom size) | data entries (data length) | trailer

The header, big-endian: magic and version (one byte, 0x50), chunk type (0 user, 1
tracking delta, 2 tracking snapshot), number of entries (u16), number of records (u32),
timestamp (i64, ms), epoch (u64), chunk id = first offset (u64), CRC-32 of the data
entries (u32), data length (u32), trailer length (u32), bloom size (u8), 3 reserved.

A consumer gets the header as stored followed by the data entries only: RabbitMQ skips
the bloom filter and the trailer of a user chunk but leaves their sizes in the header
(osiris_log:send_file, select_amount_to_send), and clients read data length bytes.

Data entries: a simple entry is a u32 whose high bit is 0 (the length) and the record;
a sub-batch entry starts with a byte ``1ccc0000`` (ccc = compression: 0 none, 1 gzip,
2 snappy, 3 lz4, 4 zstd), then records (u16), uncompressed length (u32), length (u32)
and the (compressed) body, itself a run of (u32 length, record). Publish frames carry
entries in the same two shapes. Only none and gzip are unpacked here (the stdlib has
no snappy, lz4 or zstd); the others stay raw in ``SubBatchEntry.body``.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from roost.stream_protocol.constants import (
    CHUNK_HEADER_SIZE,
    CHUNK_MAGIC_VERSION,
    CHUNK_USER,
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    PRECONDITION_FAILED,
    UNKNOWN_FRAME,
)
from roost.stream_protocol.errors import StreamProtocolError

_HEADER: Final = struct.Struct(">BBHIqQQIIIB3x")
_U32: Final = struct.Struct(">I")
_SUB_BATCH_HEAD: Final = struct.Struct(">BHII")
assert _HEADER.size == CHUNK_HEADER_SIZE


@dataclass(frozen=True, slots=True)
class ChunkHeader:
    chunk_type: int
    num_entries: int
    num_records: int
    timestamp: int
    epoch: int
    chunk_id: int  # the offset of the chunk's first record
    crc: int
    data_length: int
    trailer_length: int = 0
    bloom_size: int = 0
    magic_version: int = CHUNK_MAGIC_VERSION

    def pack(self) -> bytes:
        return _HEADER.pack(
            self.magic_version, self.chunk_type, self.num_entries, self.num_records,
            self.timestamp, self.epoch, self.chunk_id, self.crc, self.data_length,
            self.trailer_length, self.bloom_size,
        )

    @classmethod
    def unpack(cls, chunk: bytes | bytearray | memoryview) -> ChunkHeader:
        """The header at the start of ``chunk``; a short or foreign header is malformed."""
        if len(chunk) < CHUNK_HEADER_SIZE:
            raise StreamProtocolError(UNKNOWN_FRAME, f"chunk of {len(chunk)} bytes has no header")
        (magic, ctype, entries, records, ts, epoch, chunk_id, crc, data_len, trailer_len,
         bloom) = _HEADER.unpack_from(chunk)
        if magic >> 4 != CHUNK_MAGIC_VERSION >> 4:
            raise StreamProtocolError(UNKNOWN_FRAME, f"chunk magic 0x{magic:02x}")
        return cls(ctype, entries, records, ts, epoch, chunk_id, crc, data_len, trailer_len,
                   bloom, magic)


@dataclass(frozen=True, slots=True)
class SimpleEntry:
    data: bytes


@dataclass(frozen=True, slots=True)
class SubBatchEntry:
    record_count: int
    body: bytes  # the records, compressed as ``compression`` says
    uncompressed_length: int
    compression: int = COMPRESSION_NONE

    @classmethod
    def from_records(
        cls, records: Iterable[bytes], compression: int = COMPRESSION_NONE
    ) -> SubBatchEntry:
        items = list(records)
        raw = b"".join(_U32.pack(len(r)) + r for r in items)
        if compression == COMPRESSION_GZIP:
            body = gzip.compress(raw)
        elif compression == COMPRESSION_NONE:
            body = raw
        else:
            raise ValueError(f"compression {compression} needs a codec outside the stdlib")
        return cls(len(items), body, len(raw), compression)

    def records(self) -> list[bytes]:
        """The records; contents that do not add up are PRECONDITION_FAILED, the code
        RabbitMQ rejects such a published sub-batch with."""
        if self.compression == COMPRESSION_NONE:
            raw = self.body
        elif self.compression == COMPRESSION_GZIP:
            try:
                raw = gzip.decompress(self.body)
            except (OSError, EOFError, zlib.error) as exc:
                raise StreamProtocolError(
                    PRECONDITION_FAILED, f"bad gzip sub-batch: {exc}"
                ) from None
        else:
            raise StreamProtocolError(
                PRECONDITION_FAILED, f"sub-batch compression {self.compression} not supported"
            )
        if len(raw) != self.uncompressed_length:
            raise StreamProtocolError(PRECONDITION_FAILED, "sub-batch uncompressed length differs")
        out: list[bytes] = []
        pos = 0
        for _ in range(self.record_count):
            if pos + 4 > len(raw):
                raise StreamProtocolError(PRECONDITION_FAILED, "sub-batch ends inside a record")
            (size,) = _U32.unpack_from(raw, pos)
            pos += 4
            if pos + size > len(raw):
                raise StreamProtocolError(PRECONDITION_FAILED, "sub-batch ends inside a record")
            out.append(raw[pos : pos + size])
            pos += size
        if pos != len(raw):
            raise StreamProtocolError(PRECONDITION_FAILED, "bytes after a sub-batch's records")
        return out


Entry = SimpleEntry | SubBatchEntry


def encode_entry(entry: Entry) -> bytes:
    if isinstance(entry, SimpleEntry):
        if len(entry.data) >= 1 << 31:
            raise ValueError("entry too long")
        return _U32.pack(len(entry.data)) + entry.data
    head = _SUB_BATCH_HEAD.pack(
        0x80 | entry.compression << 4, entry.record_count, entry.uncompressed_length,
        len(entry.body),
    )
    return head + entry.body


def read_entry(data: bytes | memoryview, pos: int) -> tuple[Entry, int]:
    """The entry at ``pos`` and the position after it; one that runs past the end is
    malformed (UNKNOWN_FRAME)."""
    end = len(data)
    if pos + 4 > end:
        raise StreamProtocolError(UNKNOWN_FRAME, "entry header cut short")
    if not data[pos] & 0x80:
        (size,) = _U32.unpack_from(data, pos)
        pos += 4
        if pos + size > end:
            raise StreamProtocolError(UNKNOWN_FRAME, "entry runs past the end")
        return SimpleEntry(bytes(data[pos : pos + size])), pos + size
    if pos + _SUB_BATCH_HEAD.size > end:
        raise StreamProtocolError(UNKNOWN_FRAME, "sub-batch header cut short")
    kind, count, uncompressed, size = _SUB_BATCH_HEAD.unpack_from(data, pos)
    pos += _SUB_BATCH_HEAD.size
    if pos + size > end:
        raise StreamProtocolError(UNKNOWN_FRAME, "sub-batch runs past the end")
    entry = SubBatchEntry(count, bytes(data[pos : pos + size]), uncompressed, (kind >> 4) & 0x07)
    return entry, pos + size


def iter_entries(data: bytes | memoryview, num_entries: int) -> Iterator[Entry]:
    """The ``num_entries`` entries of a chunk's data section, which they must fill."""
    pos = 0
    for _ in range(num_entries):
        entry, pos = read_entry(data, pos)
        yield entry
    if pos != len(data):
        raise StreamProtocolError(UNKNOWN_FRAME, "bytes after a chunk's last entry")


def build_chunk(
    entries: Iterable[Entry],
    *,
    chunk_id: int,
    timestamp: int,
    epoch: int = 0,
    chunk_type: int = CHUNK_USER,
) -> bytes:
    """A chunk as a consumer receives it (header + data entries, no bloom filter or
    trailer), CRC and counts filled in."""
    items = list(entries)
    data = b"".join(encode_entry(e) for e in items)
    records = sum(1 if isinstance(e, SimpleEntry) else e.record_count for e in items)
    header = ChunkHeader(
        chunk_type, len(items), records, timestamp, epoch, chunk_id, zlib.crc32(data), len(data)
    )
    return header.pack() + data


def chunk_data(chunk: bytes | memoryview) -> memoryview:
    """The data entries of a delivered chunk (header + data, as sent)."""
    header = ChunkHeader.unpack(chunk)
    end = CHUNK_HEADER_SIZE + header.data_length
    if end > len(chunk):
        raise StreamProtocolError(UNKNOWN_FRAME, "chunk shorter than its data length")
    return memoryview(chunk)[CHUNK_HEADER_SIZE:end]


def chunk_records(chunk: bytes | memoryview, *, check_crc: bool = True) -> list[bytes]:
    """Every record of a delivered chunk, sub-batches unpacked, in offset order."""
    header = ChunkHeader.unpack(chunk)
    data = chunk_data(chunk)
    if check_crc and zlib.crc32(data) != header.crc:
        raise StreamProtocolError(UNKNOWN_FRAME, "chunk CRC mismatch")
    out: list[bytes] = []
    for entry in iter_entries(data, header.num_entries):
        if isinstance(entry, SimpleEntry):
            out.append(entry.data)
        else:
            out.extend(entry.records())
    return out
