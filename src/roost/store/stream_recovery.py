"""A stream log's recovery at open: its segments found, the active one's torn tail cut,
its index rewritten, and where the log goes on (next offset, last timestamp, the first
offset of its last record: ``last``'s chunk, which may sit in the segment before).

Scanning stops at the first torn or corrupt record; what follows it is dropped and
counted, never hidden.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import NamedTuple

from roost.codecs.chunk_layout import CHUNK_FLAG, NAME_MASK, chunk_count
from roost.store.atomic_file import replace_file
from roost.store.stream_chunk import intact
from roost.store.stream_segment import HEADER, INDEX_ENTRY, INDEX_EVERY, SEGMENT_SUFFIX, Segment


class Tail(NamedTuple):
    """Where a recovered log goes on."""

    dropped_bytes: int  # cut off a torn tail (0: nothing was)
    next_offset: int
    last_timestamp: int
    last_chunk_offset: int


def load_segments(directory: Path) -> list[Segment]:
    """The segments in ``directory``, oldest first, their sizes and indexes read."""
    bases = sorted(
        int(p.name[: -len(SEGMENT_SUFFIX)])
        for p in directory.glob("*" + SEGMENT_SUFFIX)
        if p.name[: -len(SEGMENT_SUFFIX)].isdigit()
    )
    segments = []
    for base in bases:
        seg = Segment(directory, base)
        seg.size = seg.path.stat().st_size
        seg.load_index()
        segments.append(seg)
    return segments


def recover_tail(segments: list[Segment]) -> Tail:
    """Scan the active segment from its last index entry; cut a torn tail."""
    seg = segments[-1]
    start = seg.idx_positions[-1] if seg.idx_positions else 0
    good_end, next_offset, last_ts, entries, last_start = scan(seg.path, start)
    for offset, position, ts in entries:
        if not seg.idx_offsets or offset > seg.idx_offsets[-1]:
            seg.add_index(offset, position, ts)
    dropped = 0
    if good_end < seg.size:
        dropped = seg.size - good_end
        with open(seg.path, "r+b") as f:
            f.truncate(good_end)
        seg.size = good_end
    rewrite_index(seg)
    if last_start < 0 and len(segments) > 1:  # just rolled: the last record is
        before = segments[-2]  # in the segment before, after its last index entry
        at = before.idx_positions[-1] if before.idx_positions else 0
        last_start = scan(before.path, at)[4]
    return Tail(
        dropped,
        next_offset if next_offset >= 0 else seg.base,
        last_ts or 0,
        max(last_start, 0),
    )


def scan(
    path: Path, start: int
) -> tuple[int, int, int | None, list[tuple[int, int, int]], int]:
    """Walk valid records from ``start``: (end of last good record, next offset, last ts,
    index entries to add, first offset of the last good record or -1). Stops at the
    first torn or corrupt record."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    pos = 0
    next_offset = last_start = -1
    last_ts: int | None = None
    entries: list[tuple[int, int, int]] = []
    last_indexed = -INDEX_EVERY
    while pos + HEADER.size <= len(data):
        crc, length, offset, ts, _pid, nlen = HEADER.unpack_from(data, pos)
        end = pos + 8 + length
        if length < HEADER.size - 8 or end > len(data):
            break
        count = 1
        if nlen & CHUNK_FLAG:  # a whole chunk (both CRCs held): all its messages count
            payload = pos + HEADER.size + (nlen & NAME_MASK)
            if not intact(data, pos, end, crc, payload):
                break
            count = chunk_count(data, payload)
        elif zlib.crc32(memoryview(data)[pos + 4 : end]) != crc:
            break
        if pos + start - last_indexed >= INDEX_EVERY:
            entries.append((offset, pos + start, ts))
            last_indexed = pos + start
        next_offset = offset + count
        last_start = offset
        last_ts = ts
        pos = end
    return start + pos, next_offset, last_ts, entries, last_start


def rewrite_index(seg: Segment) -> None:
    """Write the index file anew from ``seg``'s arrays (replaced atomically)."""
    data = b"".join(
        INDEX_ENTRY.pack(o, p, t)
        for o, p, t in zip(seg.idx_offsets, seg.idx_positions, seg.idx_times, strict=True)
    )
    replace_file(seg.index_path, data, durable=False)  # rebuilt from the segment if lost
