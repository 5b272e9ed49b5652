"""A stream segment: the record format and one segment file with its sparse index.

Record layout: stream_log.py's docstring. The index holds one (offset, position,
timestamp) entry per ``INDEX_EVERY`` bytes of records.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from array import array
from pathlib import Path

HEADER = struct.Struct("<IIQqqH")  # crc, length after crc+length, offset, ts, pub id, name len
CRC = struct.Struct("<I")
INDEX_ENTRY = struct.Struct("<QQq")  # offset, file position, timestamp
INDEX_EVERY = 4096  # bytes of records between two index entries
SEGMENT_SUFFIX = ".seg"
DEFAULT_SEGMENT_BYTES = 500_000_000  # RabbitMQ's default x-stream-max-segment-size-bytes


def crc_record(
    offset: int, timestamp_ms: int, publishing_id: int, name: bytes, payload: bytes
) -> bytes:
    """One record as the log writes it (stream_log.py's docstring has the layout)."""
    length = HEADER.size - 8 + len(name) + len(payload)
    head = HEADER.pack(0, length, offset, timestamp_ms, publishing_id, len(name))
    crc = zlib.crc32(payload, zlib.crc32(name, zlib.crc32(head[4:])))
    return CRC.pack(crc) + head[4:] + name + payload


def segment_name(base: int) -> str:
    return f"{base:020d}"


class Segment:
    """One segment file and its sparse index, held in memory as three parallel arrays."""

    def __init__(self, directory: Path, base: int) -> None:
        self.base = base
        self.path = directory / (segment_name(base) + SEGMENT_SUFFIX)
        self.index_path = directory / (segment_name(base) + ".idx")
        self.idx_offsets = array("Q")
        self.idx_positions = array("Q")
        self.idx_times = array("q")
        self.size = 0

    @property
    def first_timestamp(self) -> int | None:
        return self.idx_times[0] if self.idx_times else None

    def add_index(self, offset: int, position: int, ts: int) -> bytes:
        self.idx_offsets.append(offset)
        self.idx_positions.append(position)
        self.idx_times.append(ts)
        return INDEX_ENTRY.pack(offset, position, ts)

    def drop_index_from(self, count: int) -> None:
        del self.idx_offsets[count:]
        del self.idx_positions[count:]
        del self.idx_times[count:]

    def load_index(self) -> None:
        """Read the index file, dropping a torn or out-of-file tail."""
        try:
            data = self.index_path.read_bytes()
        except FileNotFoundError:
            data = b""
        usable = len(data) - len(data) % INDEX_ENTRY.size
        for pos in range(0, usable, INDEX_ENTRY.size):
            offset, position, ts = INDEX_ENTRY.unpack_from(data, pos)
            if position >= self.size:
                break
            self.idx_offsets.append(offset)
            self.idx_positions.append(position)
            self.idx_times.append(ts)

    def seek_offset(self, offset: int) -> int:
        """File position of the last indexed record at or before ``offset``."""
        i = bisect.bisect_right(self.idx_offsets, offset) - 1
        return self.idx_positions[i] if i >= 0 else 0

    def seek_time(self, ts: int) -> int:
        i = bisect.bisect_left(self.idx_times, ts) - 1
        return self.idx_positions[i] if i >= 0 else 0
