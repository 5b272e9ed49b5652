"""Append-only records: ``[u32 length][u32 crc32 of payload][payload]``.

Scanning stops at the first record that is cut short (a torn tail) and skips a record
whose checksum fails when its length still points inside the file; what it dropped is
returned so recovery can say so.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

HEADER = struct.Struct(">II")
HEADER_SIZE = HEADER.size
MAX_RECORD = 1 << 30  # a length beyond this is garbage, not a record


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass
class ScanResult:
    valid_end: int = 0  # where the next record may be appended
    torn_tail: int = 0  # bytes dropped at the end
    bad_crc: list[int] = field(default_factory=list)  # offsets of records skipped


def scan(data: bytes | memoryview, result: ScanResult) -> Iterator[tuple[int, memoryview]]:
    """Yield (offset, payload) of every intact record; fill ``result`` as it goes."""
    view = memoryview(data)
    size = len(view)
    pos = 0
    while pos < size:
        if pos + HEADER_SIZE > size:
            break
        length, crc = HEADER.unpack_from(view, pos)
        end = pos + HEADER_SIZE + length
        if length > MAX_RECORD or end > size or (length == 0 and crc == 0):
            break  # cut short, or zeros past the real end: the tail is torn
        payload = view[pos + HEADER_SIZE : end]
        if zlib.crc32(payload) != crc:
            result.bad_crc.append(pos)
        else:
            yield pos, payload
        pos = end
        result.valid_end = pos
    result.torn_tail = size - result.valid_end


def read_record(data: bytes, expected_offset: int = 0) -> bytes:
    """The payload of one framed record read from ``expected_offset``; ValueError if bad."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"record at {expected_offset} is cut short")
    length, crc = HEADER.unpack_from(data, 0)
    payload = data[HEADER_SIZE : HEADER_SIZE + length]
    if len(payload) != length or zlib.crc32(payload) != crc:
        raise ValueError(f"record at {expected_offset} fails its checksum")
    return payload
