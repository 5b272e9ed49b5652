"""The in-memory twin of the disk store's streams (``StreamStorage``, ``StreamStore`` and
``StreamCursor`` of ``core.durability``): records kept in RAM in the disk log's format,
for a broker without a data directory and the unit tests (see ``store/memory.py``)."""

from __future__ import annotations

from typing import Any

from roost.codecs.stream_message import (
    already_stored,
    encode_stream_message,
    message_prefix,
    split_batch,
)
from roost.store.stream_segment import HEADER, crc_record

Record = tuple[int, int, str, str, tuple[Any, ...], bytes]


class MemoryCursor:
    def __init__(self, stream: MemoryStream, offset: int) -> None:
        self._stream = stream
        self._offset = offset

    @property
    def offset(self) -> int:
        return max(self._offset, self._stream.first_offset)

    def next(self) -> Record | None:
        stream = self._stream
        offset = self.offset
        if offset >= stream.next_offset:
            return None
        self._offset = offset + 1
        ts, exchange, routing_key, properties, body, _producer, _id = stream.record(offset)
        headers = properties[2]  # the headers (codecs/properties.py's order)
        if isinstance(headers, dict):  # the caller adds x-stream-*: a copy, as a decode gives
            properties = (*properties[:2], dict(headers), *properties[3:])
        return offset, ts, exchange, routing_key, properties, body

    def next_tagged(self) -> tuple[Record, str, int] | None:
        """``next`` with the record's producer and publishing id (the disk cursor's)."""
        offset = self.offset
        record = self.next()
        if record is None:
            return None
        producer, publishing_id = self._stream.record(offset)[5:7]
        return record, producer, publishing_id

    def next_chunk(
        self, max_bytes: int, end: int | None, wire: bool = False
    ) -> tuple[int, int, int, bytes] | None:
        """Records in the disk log's format (docs/streams.md, "Chunked reads"); plain
        records only (memory keeps no chunk records, so ``wire`` changes nothing)."""
        stream = self._stream
        first = offset = self.offset
        stop = stream.next_offset if end is None else min(end, stream.next_offset)
        parts: list[bytes] = []
        size = 0
        while offset < stop:
            record = stream.encoded(offset)
            if parts and size + len(record) > max_bytes:
                break
            parts.append(record)
            size += len(record)
            offset += 1
        if not parts:
            return None
        self._offset = offset
        return first, offset - 1, len(parts), b"".join(parts)

    def close(self) -> None:
        pass


class MemoryStream:
    """``StreamStore``: one stream's records, producers' ids and stored offsets. Retention
    drops whole records from the head (the disk log drops whole segments)."""

    def __init__(self, max_bytes: int, max_age_ms: int) -> None:
        self.dropped_bytes = 0
        self.producers: dict[str, int] = {}
        self._records: list[tuple[int, str, str, tuple[Any, ...], bytes, str, int]] = []
        self._first = 0
        self._bytes = 0
        self._max_bytes = max_bytes
        self._max_age_ms = max_age_ms
        self._offsets: dict[str, int] = {}
        self._last_chunk = 0  # the first offset of the last append's messages

    @property
    def first_offset(self) -> int:
        return self._first

    @property
    def last_chunk_offset(self) -> int:
        return max(self._last_chunk, self._first)

    @property
    def next_offset(self) -> int:
        return self._first + len(self._records)

    @property
    def first_timestamp(self) -> int | None:
        return self._records[0][0] if self._records else None

    @property
    def last_timestamp(self) -> int:
        return self._records[-1][0] if self._records else 0

    def record(self, offset: int) -> tuple[int, str, str, tuple[Any, ...], bytes, str, int]:
        return self._records[offset - self._first]

    def encoded(self, offset: int) -> bytes:
        ts, exchange, routing_key, properties, body, producer, pid = self.record(offset)
        payload = encode_stream_message(exchange, routing_key, properties, body)
        return crc_record(offset, ts, pid, producer.encode("utf-8"), payload)

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
        offset = self._last_chunk = self.next_offset
        record = (timestamp_ms, exchange, routing_key, properties, bytes(body))
        self._records.append((*record, producer, publishing_id))
        self._bytes += HEADER.size + len(body)
        if producer:
            self.producers[producer] = publishing_id
        self._retain(timestamp_ms)
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
        from roost.codecs.stream_message import decode_stream_message

        entries = split_batch(batch)  # ValueError before anything is kept
        prefix = message_prefix(exchange, routing_key)
        last = self.producers.get(producer) if producer else None
        skip = already_stored(last, first_id, len(entries))
        for i, entry in enumerate(entries[skip:], start=skip):
            _ex, _rk, properties, body = decode_stream_message(prefix + bytes(entry))
            self.append(
                exchange,
                routing_key,
                properties,
                body,
                timestamp_ms=timestamp_ms,
                producer=producer,
                publishing_id=first_id + i,
            )
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
        """As the disk's chunk record would expand (stream_chunk.py), one record each."""
        from roost.store.stream_chunk import message_values, split_entries

        found = split_entries(entries)  # ValueError before anything is kept
        last = self.producers.get(producer) if producer else None
        skip = already_stored(last, first_id, len(found))
        first = self.next_offset
        for i, entry in enumerate(found[skip:], start=skip):
            properties, body = message_values(bytes(entry[4:]))
            self.append(
                exchange,
                routing_key,
                properties,
                body,
                timestamp_ms=timestamp_ms,
                producer=producer,
                publishing_id=first_id + i,
            )
        if skip < len(found):  # one chunk, as the disk stores it
            self._last_chunk = first
        return len(found) - skip

    def _retain(self, now_ms: int) -> None:
        records = self._records
        while len(records) > 1 and (
            (self._max_bytes and self._bytes > self._max_bytes)
            or (self._max_age_ms and records[0][0] < now_ms - self._max_age_ms)
        ):
            dropped = records.pop(0)
            self._bytes -= HEADER.size + len(dropped[4])
            self._first += 1

    def is_duplicate(self, producer: str, publishing_id: int) -> bool:
        last = self.producers.get(producer)
        return last is not None and publishing_id <= last

    def reader(self, offset: int) -> MemoryCursor:
        return MemoryCursor(self, offset)

    def offset_for_time(self, timestamp_ms: int) -> int:
        for i, record in enumerate(self._records):
            if record[0] >= timestamp_ms:
                return self._first + i
        return self.next_offset

    def truncate(self, offset: int) -> int:
        keep = max(offset - self._first, 0)
        for dropped in self._records[keep:]:
            self._bytes -= HEADER.size + len(dropped[4])
        del self._records[keep:]
        self._last_chunk = min(self._last_chunk, max(self.next_offset - 1, self._first))
        return self.next_offset

    def restart_at(self, base: int) -> None:
        self._records.clear()
        self._bytes = 0
        self._first = self._last_chunk = base

    committed_mark = 0

    def mark_committed(self, offset: int) -> None:
        self.committed_mark = offset

    def stored_offset(self, name: str) -> int | None:
        return self._offsets.get(name)

    def store_offset(self, name: str, offset: int) -> None:
        self._offsets[name] = offset

    def close(self) -> None:
        pass

    def destroy(self) -> None:
        self._records.clear()
        self._offsets.clear()


class MemoryStreams:
    """``StreamStorage``: streams by (vhost, name); none is saved across processes."""

    def __init__(self) -> None:
        self._streams: dict[tuple[str, str], MemoryStream] = {}

    def open_stream(
        self,
        vhost: str,
        name: str,
        arguments: dict[str, Any],
        *,
        max_segment_bytes: int,
        max_bytes: int,
        max_age_ms: int,
    ) -> MemoryStream:
        stream = self._streams.get((vhost, name))
        if stream is None:
            stream = self._streams[(vhost, name)] = MemoryStream(max_bytes, max_age_ms)
        return stream

    def saved_streams(self) -> list[tuple[str, str, dict[str, Any]]]:
        return []
