"""Append-only records: ``[u32 length][u32 crc32 of payload][payload]``.

Scanning never trusts a length field it cannot check: a record is taken only when its
length stays inside the file and its checksum passes. After a bad record the scan
*resynchronises*: it looks, byte by byte, for the next offset where an intact record
starts (and that the caller finds plausible, e.g. a queue's next sequence number), so a
flipped bit in one header costs that record, not the rest of the segment. What was
skipped is returned as regions (one warning each); damage that nothing intact follows
is the torn tail.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

HEADER = struct.Struct(">II")
HEADER_SIZE = HEADER.size
MAX_RECORD = 1 << 30  # a length beyond this is garbage, not a record

# Called on a candidate payload found while resynchronising, before its checksum is
# computed: False rejects it (a sequence number that cannot come next, say).
Plausible = Callable[[memoryview], bool]


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass
class ScanResult:
    valid_end: int = 0  # where the next record may be appended
    torn_tail: int = 0  # bytes dropped at the end
    dropped: list[tuple[int, int]] = field(default_factory=list)  # (offset, length) skipped


def scan(
    data: bytes | memoryview,
    result: ScanResult,
    *,
    min_length: int = 1,
    plausible: Plausible | None = None,
) -> Iterator[tuple[int, memoryview]]:
    """Yield (offset, payload) of every intact record; fill ``result`` as it goes.

    ``min_length``: shorter payloads are not records (zeros past the real end of a file
    would otherwise read as empty records). ``plausible`` vets candidates found while
    resynchronising; the caller's state may change between yields (it is called lazily).
    """
    view = memoryview(data)
    size = len(view)
    pos = 0
    while pos < size:
        end = _intact(view, pos, size, min_length)
        if end:
            yield pos, view[pos + HEADER_SIZE : end]
            pos = result.valid_end = end
            continue
        resume = _resync(view, pos, size, min_length, plausible)
        if resume < 0:
            break  # nothing intact follows: a torn tail
        result.dropped.append((pos, resume - pos))
        pos = resume
    result.torn_tail = size - result.valid_end


def _intact(view: memoryview, pos: int, size: int, min_length: int) -> int:
    """The end of the intact record at ``pos``, or 0."""
    if pos + HEADER_SIZE > size:
        return 0
    length: int
    crc: int
    length, crc = HEADER.unpack_from(view, pos)
    end = pos + HEADER_SIZE + length
    if length < min_length or length > MAX_RECORD or end > size:
        return 0
    if zlib.crc32(view[pos + HEADER_SIZE : end]) != crc:
        return 0
    return end


def _resync(
    view: memoryview, bad: int, size: int, min_length: int, plausible: Plausible | None
) -> int:
    """The offset of the next intact, plausible record after the bad one at ``bad``, or
    -1. Where the bad record's own length is sane and an intact record follows it (only
    its payload was damaged), that is the answer without a byte-by-byte search."""
    if bad + HEADER_SIZE <= size:
        length: int = HEADER.unpack_from(view, bad)[0]
        after = bad + HEADER_SIZE + length
        if (
            min_length <= length <= MAX_RECORD
            and after < size
            and _candidate(view, after, size, min_length, plausible)
        ):
            return after
    unpack = HEADER.unpack_from
    last = size - HEADER_SIZE - min_length
    for pos in range(bad + 1, last + 1):
        length = unpack(view, pos)[0]
        if length < min_length or pos + HEADER_SIZE + length > size:
            continue  # cheap rejection first: most offsets fail here
        if _candidate(view, pos, size, min_length, plausible):
            return pos
    return -1


def _candidate(
    view: memoryview, pos: int, size: int, min_length: int, plausible: Plausible | None
) -> bool:
    if plausible is not None and pos + HEADER_SIZE + min_length <= size:
        length = HEADER.unpack_from(view, pos)[0]
        if not plausible(view[pos + HEADER_SIZE : pos + HEADER_SIZE + length]):
            return False
    return _intact(view, pos, size, min_length) > 0


def read_record(data: bytes, expected_offset: int = 0) -> bytes:
    """The payload of one framed record read from ``expected_offset``; ValueError if bad."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"record at {expected_offset} is cut short")
    length, crc = HEADER.unpack_from(data, 0)
    payload = data[HEADER_SIZE : HEADER_SIZE + length]
    if len(payload) != length or zlib.crc32(payload) != crc:
        raise ValueError(f"record at {expected_offset} fails its checksum")
    return payload
