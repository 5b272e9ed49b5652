"""Chunked stream reads: a delivery whose body holds many records, as the broker stores
them (consumer argument ``x-roost-chunk-bytes``; the format is in docs/streams.md). And
batched writes: one publish whose body holds many messages for a stream (content type
``BATCH_CONTENT_TYPE``), each stored as its own record.

The broker sends a slice of its log file per delivery instead of one AMQP message per
record, so reading costs it next to nothing; the records are decoded here, on the Spark
executor. The record payload is the store's message encoding, hence the one import
from ``roost.store`` the pipeline is allowed (pyproject.toml's import contracts).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from typing import Any

from roost.codecs.stream_message import (
    BATCH_CONTENT_TYPE,
    BATCH_LENGTH,
    RunDecoder,
    batch_properties,
)

__all__ = ["BATCH_CONTENT_TYPE", "BATCH_LENGTH", "ChunkColumns", "batch_properties", "records"]

CHUNK_CONTENT_TYPE = "application/x-roost-stream-chunk"
# crc32, length of the rest, offset, timestamp (ms), publishing id, producer name length
_RECORD = struct.Struct("<IIQqqH")

ChunkRecord = tuple[int, int, str, str, tuple[Any, ...], bytes]


def records(data: bytes) -> Iterator[ChunkRecord]:
    """(offset, timestamp ms, exchange, routing key, the 14 properties, body) per record.
    Consecutive records with the same properties share one (read-only) tuple of them."""
    unpack, size, pos, n = _RECORD.unpack_from, _RECORD.size, 0, len(data)
    decode = RunDecoder().decode
    while pos < n:
        _crc, length, offset, timestamp, _pid, name_length = unpack(data, pos)
        end = pos + 8 + length
        if end > n:
            raise ValueError(f"chunk cut inside the record at offset {offset}")
        exchange, routing_key, properties, body = decode(data, pos + size + name_length, end)
        yield offset, timestamp, exchange, routing_key, properties, body
        pos = end


class ChunkColumns:
    """Records of chunked deliveries gathered column by column, for Arrow: offsets,
    timestamps (ms) and bodies one entry per record, the rest (exchange, routing key,
    properties) once per run of records whose bytes for them are equal. Consecutive
    records from one writer nearly always are: then a record costs a header unpack, a
    byte comparison and three appends."""

    __slots__ = ("_decode", "_meta", "bodies", "offsets", "runs", "stamps")

    def __init__(self) -> None:
        self.offsets = array("q")
        self.stamps = array("q")
        self.bodies: list[memoryview] = []
        # [exchange, routing key, properties, record count], in record order
        self.runs: list[list[Any]] = []
        self._meta = b""  # the current run's exchange, routing key and properties bytes
        self._decode = RunDecoder().decode

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, data: bytes) -> None:
        """Every record of one chunk (``records``' format)."""
        unpack, size, pos, n = _RECORD.unpack_from, _RECORD.size, 0, len(data)
        view = memoryview(data)
        meta, runs = self._meta, self.runs
        mlen = len(meta)
        offsets, stamps, bodies = self.offsets.append, self.stamps.append, self.bodies.append
        count = runs[-1][3] if runs else 0
        while pos < n:
            _crc, length, offset, timestamp, _pid, name_length = unpack(data, pos)
            end = pos + 8 + length
            if end > n:
                raise ValueError(f"chunk cut inside the record at offset {offset}")
            start = pos + size + name_length
            if not (mlen and data.startswith(meta, start) and start + mlen <= end):
                if runs:
                    runs[-1][3] = count
                exchange, routing_key, properties, body = self._decode(data, start, end)
                mlen = end - start - len(body)
                meta = data[start : start + mlen]
                runs.append([exchange, routing_key, properties, 0])
                count = 0
            offsets(offset)
            stamps(timestamp)
            bodies(view[start + mlen : end])
            count += 1
            pos = end
        if runs:
            runs[-1][3] = count
        self._meta = meta

    def clear(self) -> None:
        """Start a new set of columns (new objects: Arrow may still hold the old ones'
        memory); the current run goes on into it."""
        self.offsets = array("q")
        self.stamps = array("q")
        self.bodies = []
        self.runs = [[*self.runs[-1][:3], 0]] if self.runs else []
