"""Stored consumer offsets of one stream: an append-only log of (name, offset) records.

Each record is ``crc32 | name length | offset | name``; the last record for a name wins.
The file is compacted (written to a temporary file and renamed) when it grows.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

from roost.store.atomic_file import replace_file
from roost.store.files import append_all

_RECORD = struct.Struct("<IHq")
COMPACT_AT = 1 << 20


class OffsetStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets: dict[str, int] = {}
        self._load()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        self.dirty = False

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        pos = 0
        while pos + _RECORD.size <= len(data):
            crc, nlen, offset = _RECORD.unpack_from(data, pos)
            end = pos + _RECORD.size + nlen
            if end > len(data):
                break
            name = data[pos + _RECORD.size : end]
            if zlib.crc32(data[pos + 4 : end]) != crc:
                break  # a torn tail: what follows is lost, what precedes is kept
            self.offsets[name.decode("utf-8")] = offset
            pos = end
        if pos < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(pos)

    @staticmethod
    def _encode(name: str, offset: int) -> bytes:
        raw = name.encode("utf-8")
        body = _RECORD.pack(0, len(raw), offset)[4:] + raw
        return struct.pack("<I", zlib.crc32(body)) + body

    def store(self, name: str, offset: int) -> None:
        if self.offsets.get(name) == offset:
            return
        record = self._encode(name, offset)
        append_all(self._fd, record, self._size)  # on a full disk: raises, nothing changed
        self.offsets[name] = offset
        self._size += len(record)
        self.dirty = True
        if self._size > COMPACT_AT and self._size > 4 * len(self.offsets) * 64:
            self._compact()

    def _compact(self) -> None:
        data = b"".join(self._encode(n, o) for n, o in self.offsets.items())
        replace_file(self.path, data, tmp=self.path.with_suffix(".tmp"))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = len(data)

    def get(self, name: str) -> int | None:
        return self.offsets.get(name)

    def sync(self) -> None:
        if self.dirty:
            os.fsync(self._fd)
            self.dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1
