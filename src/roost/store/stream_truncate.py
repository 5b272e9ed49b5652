"""Cutting a stream log's tail in place (a replica's uncommitted records), and the mark of
how far a replica's log is known to be committed.

Crash safety: files go from the newest segment backwards (unlink, then ``ftruncate`` of
the segment holding the cut), each step durable (``fsync`` of the file and of the
directory) before the next, so a crash at any point leaves a log that is a prefix of the
one before the cut, which recovery reads as usual; the caller cuts again. Nothing is
appended after a cut until the cut is on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from roost.codecs.chunk_layout import CHUNK_FLAG, NAME_MASK, chunk_count
from roost.store.atomic_file import replace_file
from roost.store.files import fsync_path
from roost.store.stream_segment import HEADER, Segment

MARK = "committed.json"  # {"committed": offset}: records below it are known committed


def cut_position(seg: Segment, offset: int) -> int:
    """File position of the first record of ``seg`` holding an offset at or after
    ``offset`` (a chunk record straddling it goes whole: the log ends before it)."""
    with open(seg.path, "rb") as f:
        start = seg.seek_offset(offset)
        f.seek(start)
        data = f.read(seg.size - start)
    pos = 0
    while pos + HEADER.size <= len(data):
        _crc, length, first, _ts, _pid, nlen = HEADER.unpack_from(data, pos)
        count = 1
        if nlen & CHUNK_FLAG:
            count = chunk_count(data, pos + HEADER.size + (nlen & NAME_MASK))
        if first + count > offset:
            break
        pos += 8 + length
    return start + pos


def cut_segments(directory: Path, segments: list[Segment], offset: int) -> None:
    """Remove every record at ``offset`` or after from ``segments`` (oldest first), the
    newest first. A segment left empty at the front keeps its file, so the log goes on
    at its base."""
    for seg in reversed(segments):
        if seg.base >= offset and seg is not segments[0]:
            seg.path.unlink(missing_ok=True)
            seg.index_path.unlink(missing_ok=True)
            fsync_path(directory)
            continue
        position = 0 if seg.base >= offset else cut_position(seg, offset)
        if position < seg.size:
            with open(seg.path, "r+b") as f:
                f.truncate(position)
                os.fsync(f.fileno())
        if seg.base < offset:
            break
    with contextlib.suppress(FileNotFoundError):  # rebuilt on reopening from the records
        (directory / "producers.json").unlink()
    fsync_path(directory)


def restart_at(directory: Path, segments: list[Segment], base: int, name: str) -> None:
    """Remove every segment (the newest first) and leave one empty segment at ``base``."""
    for seg in reversed(segments):
        seg.path.unlink(missing_ok=True)
        seg.index_path.unlink(missing_ok=True)
        fsync_path(directory)
    (directory / name).touch()
    with contextlib.suppress(FileNotFoundError):
        (directory / "producers.json").unlink()
    fsync_path(directory)


def read_mark(directory: Path) -> int:
    try:
        return int(json.loads((directory / MARK).read_text())["committed"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def write_mark(directory: Path, committed: int) -> None:
    """Atomically replaced, not fsynced: a mark lost in a crash is an older one, which
    only makes the next catch-up ship more."""
    replace_file(directory / MARK, json.dumps({"committed": committed}).encode(), durable=False)
