"""Writing rows: each partition publishes its rows, batched into one message per batch
when the target is a stream, with publishing ids that make a retried task's rows
come once; ``RoostBatchWriter`` and ``RoostStreamWriter``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from roost.amqp import codec_methods as m
from roost.pipeline.amqp import Client, RoostError, properties
from roost.pipeline.chunks import BATCH_CONTENT_TYPE, BATCH_LENGTH, batch_properties
from roost.pipeline.options import _Options

_BATCH_SHIFT = 32  # publishing id = batch id << 32 | row position + 1

class Committed(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count



_WRITE_COLUMNS = ("body", "routing_key", "headers", "content_type", "message_id", "correlation_id")


def _columns(batch: Any) -> list[list[Any]]:
    """The written columns of an Arrow record batch as Python lists (None for absent
    ones); ``body`` as bytes, whether the column is binary or string."""
    import pyarrow as pa  # type: ignore[import-untyped]

    names = batch.schema.names
    out: list[list[Any]] = []
    for name in _WRITE_COLUMNS:
        if name not in names:
            out.append([None] * batch.num_rows)
            continue
        column = batch.column(name)
        if name == "body" and (
            pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        ):
            column = column.cast(pa.binary())
        out.append(column.to_pylist())
    return out


def _row_headers(headers_in: Any) -> dict[str, Any]:
    """A ``headers`` cell (Arrow map: key/value pairs) as a table, nulls left out."""
    return {k: v for k, v in headers_in if v is not None} if headers_in else {}


def _row_properties(
    headers: dict[str, Any], ctype: str | None, mid: str | None, cid: str | None
) -> tuple[Any, ...]:
    """A written row's 14 basic properties in spec order: persistent, plus its columns."""
    return (ctype, None, headers or None, 2, None, cid, None, None, mid) + (None,) * 5


class _Publisher:
    """Publishes a task's rows with windowed confirms: ``confirmBatch`` rows at a time,
    going on while up to ``confirmWindow`` are unconfirmed; ``close`` waits for all.
    Row ``i`` (from 1) of the task gets publishing id ``batch id << 32 | i``.

    To a stream through the default exchange (``batched``), each ``confirmBatch`` rows
    go as one batched publish (docs/streams.md): the broker stores every row as its own
    record, with its own publishing id, and does per-row work only in the store. Else
    each row is one mandatory publish with the producer and id headers."""

    def __init__(
        self, client: Client, opts: _Options, producer: str, batch: int, batched: bool
    ) -> None:
        self.client = client
        self.producer = producer
        self.exchange = opts.get("exchange") or ""
        self.default_key = opts.get("routingKey") or (opts.stream if not self.exchange else "")
        self.rows_per_flush = max(1, int(opts.get("confirmBatch") or "2000"))
        window = int(opts.get("confirmWindow") or "20000")
        self.batched = batched
        # the broker confirms a batched publish as one message
        self.window = max(1, window // self.rows_per_flush) if batched else window
        self.next_id = (batch << _BATCH_SHIFT) + 1
        self.count = 0
        self.parts: list[bytes] = []  # a batched publish's body, being built
        self.batch_first = self.next_id
        client.confirm_select()

    def add(self, batch: Any) -> None:
        bodies, keys, headers_col, ctypes, mids, cids = _columns(batch)
        if self.batched:
            self._add_batched(bodies, headers_col, ctypes, mids, cids)
            return
        client, flush, producer = self.client, self.rows_per_flush, self.producer
        for body, key, headers_in, ctype, mid, cid in zip(
            bodies, keys, headers_col, ctypes, mids, cids, strict=True
        ):
            headers = _row_headers(headers_in)
            headers["x-stream-producer-name"] = producer
            headers["x-publishing-id"] = self.next_id
            client.publish(
                self.exchange,
                key or self.default_key,
                m.BasicProperties(*_row_properties(headers, ctype, mid, cid)),
                body or b"",
                mandatory=True,  # reaching no queue fails the task (flush_confirmed)
            )
            self.next_id += 1
            self.count += 1
            if self.count % flush == 0:
                client.flush_confirmed(self.window)  # a nack or lost connection fails the task

    def _add_batched(
        self, bodies: list[Any], headers: list[Any], ctypes: list[Any], mids: list[Any],
        cids: list[Any],
    ) -> None:
        parts, pack, flush = self.parts, BATCH_LENGTH.pack, self.rows_per_flush
        plain = batch_properties(_row_properties({}, None, None, None))
        for body, headers_in, ctype, mid, cid in zip(
            bodies, headers, ctypes, mids, cids, strict=True
        ):
            raw = plain
            if headers_in or ctype is not None or mid is not None or cid is not None:
                raw = batch_properties(_row_properties(_row_headers(headers_in), ctype, mid, cid))
            body = body or b""
            parts += (pack(len(raw) + len(body)), raw, body)
            self.count += 1
            if self.count % flush == 0:
                self._send_batch()

    def _send_batch(self) -> None:
        if not self.parts:
            return
        rows = len(self.parts) // 3
        self.client.publish(
            "",
            self.default_key,
            properties(
                content_type=BATCH_CONTENT_TYPE,
                headers={
                    "x-stream-producer-name": self.producer,
                    "x-publishing-id": self.batch_first,
                },
                delivery_mode=2,
            ),
            b"".join(self.parts),
            mandatory=True,
        )
        self.parts.clear()  # (in place: _add_batched holds it)
        self.batch_first += rows
        self.client.flush_confirmed(self.window)

    def close(self) -> Committed:
        if self.batched:
            self._send_batch()
        self.client.flush_confirmed()
        return Committed(self.count)


def _publish_batches(
    opts: _Options, batches: Iterator[Any], producer: str, batch: int, batched: bool
) -> Committed:
    with Client(opts.url) as client:
        publisher = _Publisher(client, opts, producer, batch, batched)
        for record_batch in batches:
            publisher.add(record_batch)
        return publisher.close()


def _partition_id() -> int:
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class RoostBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.batched = opts.check_target()
        # made on the driver, shipped to every task: a retried task reuses the name
        self.producer = opts.get("producerName") or f"spark-{uuid.uuid4()}"

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        producer = f"{self.producer}-p{_partition_id()}"
        return _publish_batches(self.opts, iterator, producer, 0, self.batched)


class RoostStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.batched = opts.check_target()
        self.fallback = opts.get("producerName") or ""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        ctx = TaskContext.get()
        query = (ctx.getLocalProperty("sql.streaming.queryId") if ctx else None) or self.fallback
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
        if not query:
            raise RoostError("no streaming query id visible to the task; set producerName")
        if batch is None:
            # publishing ids rise with the batch id; guessing one would make the stream
            # drop every later batch as a duplicate
            raise RoostError("no streaming batch id visible to the task")
        producer = f"spark-{query}-p{_partition_id()}"
        return _publish_batches(self.opts, iterator, producer, int(batch), self.batched)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

