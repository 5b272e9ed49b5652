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
from collections.abc import Iterator
from typing import Any

from roost.store.stream_codec import (
    BATCH_CONTENT_TYPE,
    BATCH_LENGTH,
    RunDecoder,
    batch_properties,
)

__all__ = ["BATCH_CONTENT_TYPE", "BATCH_LENGTH", "batch_properties", "records"]

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
