"""Osiris chunks: the 48-byte header, simple and sub-batch entries, CRC, and a Deliver
written as separate buffers (frame head, chunk header, data) without re-encoding."""

from __future__ import annotations

import zlib

import pytest

from roost.stream_protocol import constants as c
from roost.stream_protocol.chunks import (
    ChunkHeader,
    Entry,
    SimpleEntry,
    SubBatchEntry,
    build_chunk,
    chunk_data,
    chunk_records,
    encode_entry,
    iter_entries,
)
from roost.stream_protocol.codec import FrameReader, encode, encode_deliver_head
from roost.stream_protocol.errors import StreamProtocolError
from roost.stream_protocol.frames import Deliver


def test_chunk_header_layout_is_osiris() -> None:
    header = ChunkHeader(
        chunk_type=c.CHUNK_USER, num_entries=2, num_records=3, timestamp=-2, epoch=4,
        chunk_id=5, crc=0xDEADBEEF, data_length=6, trailer_length=7, bloom_size=16,
    )
    raw = header.pack()
    assert raw == bytes.fromhex(
        "50" "00" "0002" "00000003" "fffffffffffffffe" "0000000000000004" "0000000000000005"
        "deadbeef" "00000006" "00000007" "10" "000000"
    )
    assert ChunkHeader.unpack(raw) == header


def test_build_chunk_counts_records_and_checksums_the_data() -> None:
    entries: list[Entry] = [
        SimpleEntry(b"a"), SubBatchEntry.from_records([b"b", b"cc"]), SimpleEntry(b"")
    ]
    chunk = build_chunk(entries, chunk_id=10, timestamp=1234, epoch=2)
    header = ChunkHeader.unpack(chunk)
    data = b"".join(encode_entry(e) for e in entries)
    assert header == ChunkHeader(c.CHUNK_USER, 3, 4, 1234, 2, 10, zlib.crc32(data), len(data))
    assert bytes(chunk_data(chunk)) == data
    assert list(iter_entries(data, 3)) == entries
    assert chunk_records(chunk) == [b"a", b"b", b"cc", b""]


def test_entry_encodings() -> None:
    assert encode_entry(SimpleEntry(b"xy")) == bytes.fromhex("00000002 7879".replace(" ", ""))
    batch = SubBatchEntry.from_records([b"x"])
    # 1ccc0000, records, uncompressed length, length, then (u32 size, record)...
    assert encode_entry(batch) == bytes.fromhex("80 0001 00000005 00000005 00000001 78".replace(
        " ", ""))
    gz = SubBatchEntry.from_records([b"x" * 100, b"y"], c.COMPRESSION_GZIP)
    assert encode_entry(gz)[0] == 0x90
    assert gz.records() == [b"x" * 100, b"y"]
    with pytest.raises(ValueError):
        SubBatchEntry.from_records([b"x"], c.COMPRESSION_ZSTD)


@pytest.mark.parametrize(
    "entry",
    [
        SubBatchEntry(2, b"\x00\x00\x00\x01a", 5),  # two records promised, one there
        SubBatchEntry(1, b"\x00\x00\x00\x05a", 5),  # record longer than the body
        SubBatchEntry(1, b"\x00\x00\x00\x01ab", 6),  # bytes after the records
        SubBatchEntry(1, b"\x00\x00\x00\x01a", 9),  # uncompressed length differs
        SubBatchEntry(1, b"not gzip", 5, c.COMPRESSION_GZIP),
        SubBatchEntry(1, b"...", 5, c.COMPRESSION_LZ4),  # no lz4 in the stdlib
    ],
)
def test_sub_batches_that_do_not_add_up_are_precondition_failed(entry: SubBatchEntry) -> None:
    with pytest.raises(StreamProtocolError) as info:
        entry.records()
    assert info.value.response_code == c.PRECONDITION_FAILED


def test_crc_mismatch_and_trailing_bytes_are_caught() -> None:
    chunk = bytearray(build_chunk([SimpleEntry(b"abc")], chunk_id=0, timestamp=0))
    chunk[-1] ^= 0xFF
    with pytest.raises(StreamProtocolError):
        chunk_records(bytes(chunk))
    assert chunk_records(bytes(chunk), check_crc=False) == [b"ab\x9c"]
    with pytest.raises(StreamProtocolError):
        list(iter_entries(encode_entry(SimpleEntry(b"a")) + b"\x00", 1))


@pytest.mark.parametrize("committed", [None, 41])
def test_deliver_written_as_separate_buffers_equals_the_encoded_frame(
    committed: int | None,
) -> None:
    # the stored chunk: header and data kept apart, as a segment file would hold them
    chunk = build_chunk([SimpleEntry(b"m%d" % i) for i in range(50)], chunk_id=7, timestamp=9)
    header = memoryview(chunk)[: c.CHUNK_HEADER_SIZE]
    data = memoryview(chunk)[c.CHUNK_HEADER_SIZE :]
    buffers: list[bytes | memoryview] = [
        encode_deliver_head(3, len(header) + len(data), committed), header, data
    ]
    wire = b"".join(buffers)
    assert wire == encode(Deliver(3, chunk, committed))
    reader = FrameReader(role="client")
    reader.feed(wire)
    assert reader.frames() == [Deliver(3, chunk, committed)]
    # a stored chunk with a bloom filter and trailer: header as stored, then the data only
    stored = ChunkHeader.unpack(chunk)
    with_bloom = ChunkHeader(stored.chunk_type, stored.num_entries, stored.num_records,
                             stored.timestamp, stored.epoch, stored.chunk_id, stored.crc,
                             stored.data_length, trailer_length=27, bloom_size=16).pack()
    reader.feed(encode_deliver_head(3, len(with_bloom) + len(data)) + with_bloom + data)
    (frame,) = reader.frames()
    assert isinstance(frame, Deliver)
    assert chunk_records(frame.chunk) == [b"m%d" % i for i in range(50)]
