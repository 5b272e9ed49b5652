"""Streams on disk, behind the core's ``StreamStorage`` and ``StreamStore`` Protocols.

Each stream has a directory (``paths.stream_dir``) with its log (``stream_log.py``), its
stored consumer offsets (``offsets.log``) and ``meta.json``: the stream's vhost, name and
declaration arguments, so a stream comes back at start-up even before (or without)
persisted definitions.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.codecs.stream_message import (
    already_stored,
    decode_stream_message,
    encode_stream_message,
    message_prefix,
    split_batch,
)
from roost.store.atomic_file import replace_file
from roost.store.files import NO_SPACE
from roost.store.paths import stream_dir
from roost.store.stream_chunk import split_entries
from roost.store.stream_log import StreamLog
from roost.store.stream_offsets import OffsetStore
from roost.store.stream_reader import StreamReader
from roost.store.stream_truncate import read_mark, write_mark

log = logging.getLogger("roost.stream")

META = "meta.json"

# Told of every file a stream wrote, so the disk store's group commit fsyncs it on its own
# thread (``DiskStore.file_written``); without one a stream syncs itself when asked.
OnWrite = Callable[[Path], None]
OnNoSpace = Callable[[OSError], None]

# (offset, timestamp ms, exchange, routing key, properties, body): core.durability's
# StreamRecord, spelled out here because the store imports nothing from the core
Record = tuple[int, int, str, str, tuple[Any, ...], bytes]


class MessageCursor:
    """A ``StreamReader`` that hands out decoded messages."""

    __slots__ = ("_reader",)

    def __init__(self, reader: StreamReader) -> None:
        self._reader = reader

    @property
    def offset(self) -> int:
        return self._reader.offset

    def next(self) -> Record | None:
        record = self._reader.next()
        if record is None:
            return None
        exchange, routing_key, properties, body = decode_stream_message(record.payload)
        return record.offset, record.timestamp, exchange, routing_key, properties, body

    def next_tagged(self) -> tuple[Record, str, int] | None:
        """``next`` with the record's producer and publishing id ("", 0: none), which a
        replicated stream's leader ships so its members keep the deduplication table."""
        record = self._reader.next()
        if record is None:
            return None
        exchange, routing_key, properties, body = decode_stream_message(record.payload)
        decoded = (record.offset, record.timestamp, exchange, routing_key, properties, body)
        return decoded, record.producer, record.publishing_id

    def next_chunk(
        self, max_bytes: int, end: int | None, wire: bool = False
    ) -> tuple[int, int, int, bytes] | None:
        return self._reader.next_chunk(max_bytes, end, wire)

    def close(self) -> None:
        self._reader.close()


class DiskStream:
    def __init__(
        self,
        directory: Path,
        meta: dict[str, Any],
        *,
        max_segment_bytes: int = 0,
        max_bytes: int = 0,
        max_age_ms: int = 0,
        on_write: OnWrite | None = None,
        on_no_space: OnNoSpace | None = None,
    ) -> None:
        self.directory = directory
        self._on_write = on_write
        self._on_no_space = on_no_space
        self.log = StreamLog(
            directory,
            max_segment_bytes=max_segment_bytes,
            max_bytes=max_bytes,
            max_age_ms=max_age_ms,
        )
        self.dropped_bytes = self.log.dropped_bytes
        self.producers = self.log.producers
        self.offsets = OffsetStore(directory / "offsets.log")
        replace_file(directory / META, json.dumps(meta, default=str).encode(), durable=False)

    # -- positions ------------------------------------------------------------------------

    @property
    def first_offset(self) -> int:
        return self.log.first_offset

    @property
    def next_offset(self) -> int:
        return self.log.next_offset

    @property
    def last_chunk_offset(self) -> int:
        return self.log.last_chunk_offset

    @property
    def first_timestamp(self) -> int | None:
        return self.log.first_timestamp

    @property
    def last_timestamp(self) -> int:
        return self.log.last_timestamp

    def offset_for_time(self, timestamp_ms: int) -> int:
        return self.log.offset_for_time(timestamp_ms)

    # -- messages -------------------------------------------------------------------------

    def append(
        self,
        exchange: str,
        routing_key: str,
        properties: tuple[Any, ...],
        body: bytes,
        *,
        timestamp_ms: int,
        producer: str = "",
        publishing_id: int = 0,
    ) -> int:
        payload = encode_stream_message(exchange, routing_key, properties, body)
        try:
            offset = self.log.append(
                payload, timestamp_ms=timestamp_ms, producer=producer, publishing_id=publishing_id
            )
        except OSError as exc:  # the log took nothing of it (StreamLog.append)
            self._refused(exc)
            raise
        self._written()
        return offset

    def append_batch(
        self,
        exchange: str,
        routing_key: str,
        batch: bytes,
        *,
        timestamp_ms: int,
        producer: str = "",
        first_id: int = 0,
    ) -> int:
        entries = split_batch(batch)  # CodecError (a ValueError) before anything is written
        last = self.log.producers.get(producer) if producer else None
        skip = already_stored(last, first_id, len(entries))
        if skip == len(entries):
            return 0
        try:
            self.log.append_many(
                message_prefix(exchange, routing_key),
                entries[skip:],
                timestamp_ms=timestamp_ms,
                producer=producer,
                first_id=first_id + skip,
            )
        except OSError as exc:
            self._refused(exc)
            raise
        self._written()
        return len(entries) - skip

    def append_entries(
        self,
        exchange: str,
        routing_key: str,
        entries: bytes,
        *,
        timestamp_ms: int,
        producer: str = "",
        first_id: int = 0,
    ) -> int:
        """A stream client's messages (stream_chunk.py's entries) stored as one chunk
        record, less the leading ones a deduplicating producer already stored; how many
        were written. CodecError (a ValueError) before anything is written."""
        found = split_entries(entries)
        last = self.log.producers.get(producer) if producer else None
        skip = already_stored(last, first_id, len(found))
        if skip == len(found):
            return 0
        try:
            start = sum(len(e) for e in found[:skip])  # entries lie one after the other
            self.log.append_chunk(
                message_prefix(exchange, routing_key),
                memoryview(entries)[start:],
                len(found) - skip,
                timestamp_ms=timestamp_ms,
                producer=producer,
                first_id=first_id + skip,
            )
        except OSError as exc:
            self._refused(exc)
            raise
        self._written()
        return len(found) - skip

    def _refused(self, exc: OSError) -> None:
        if exc.errno in NO_SPACE and self._on_no_space is not None:
            self._on_no_space(exc)  # the disk alarm: publishers stop until a retry

    def _written(self) -> None:
        if self._on_write is not None:
            self._on_write(self.log.active_path)
            self.log.dirty = False  # the group commit fsyncs it, off the event loop

    def is_duplicate(self, producer: str, publishing_id: int) -> bool:
        return self.log.is_duplicate(producer, publishing_id)

    def reader(self, offset: int) -> MessageCursor:
        return MessageCursor(self.log.reader(offset))

    # -- a replica's copy -----------------------------------------------------------------

    def truncate(self, offset: int) -> int:
        return self.log.truncate(offset)

    def restart_at(self, base: int) -> None:
        self.log.restart_at(base)

    @property
    def committed_mark(self) -> int:
        return read_mark(self.directory)

    def mark_committed(self, offset: int) -> None:
        write_mark(self.directory, offset)

    # -- consumer offsets -----------------------------------------------------------------

    def stored_offset(self, name: str) -> int | None:
        return self.offsets.get(name)

    def store_offset(self, name: str, offset: int) -> None:
        self.offsets.store(name, offset)
        if self._on_write is not None:
            self._on_write(self.offsets.path)
            self.offsets.dirty = False

    # -- life -----------------------------------------------------------------------------

    def sync(self) -> None:
        self.log.sync()
        self.offsets.sync()

    def close(self) -> None:
        self.log.close()
        self.offsets.close()

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class StreamFiles:
    """Opens streams under ``data_dir`` and finds them again at start-up."""

    def __init__(
        self,
        data_dir: Path,
        on_write: OnWrite | None = None,
        on_no_space: OnNoSpace | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.on_write = on_write
        self.on_no_space = on_no_space

    def open_stream(
        self,
        vhost: str,
        name: str,
        arguments: dict[str, Any],
        *,
        max_segment_bytes: int = 0,
        max_bytes: int = 0,
        max_age_ms: int = 0,
    ) -> DiskStream:
        meta = {"vhost": vhost, "name": name, "arguments": arguments}
        return DiskStream(
            stream_dir(self.data_dir, vhost, name),
            meta,
            max_segment_bytes=max_segment_bytes,
            max_bytes=max_bytes,
            max_age_ms=max_age_ms,
            on_write=self.on_write,
            on_no_space=self.on_no_space,
        )

    def saved_streams(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(vhost, name, arguments) of every stream directory; unreadable ones are
        reported and skipped."""
        found: list[tuple[str, str, dict[str, Any]]] = []
        for meta_path in sorted(self.data_dir.glob(f"vhosts/*/streams/*/{META}")):
            try:
                meta = json.loads(meta_path.read_text())
                found.append((str(meta["vhost"]), str(meta["name"]), dict(meta["arguments"])))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("skipping stream directory %s: %s", meta_path.parent, exc)
        return found
