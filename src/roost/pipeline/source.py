"""``roost``: a PySpark data source for Roost streams (read, stream-read, write, stream-write).

Register it, then use it by name::

    from roost.pipeline import RoostDataSource
    spark.dataSource.register(RoostDataSource)
    df = (spark.readStream.format("roost")
          .option("url", "amqp://guest:guest@127.0.0.1:5672/%2F")
          .option("stream", "orders")
          .option("startingOffsets", "earliest")      # earliest | latest | an offset
          .option("maxRecordsPerTrigger", 100000)     # optional
          .load())

Columns: offset, timestamp, exchange, routing_key, headers, content_type, message_id,
correlation_id, body. Offsets are the stream's offsets (``{"offset": N}`` in the
checkpoint), so a restarted query resumes exactly. Each micro-batch's range is split into
``numPartitions`` input partitions; ``read`` opens its own connection and consumes
``[start, end)`` with ``x-stream-end-offset`` (the broker cancels at the end).

Batch: ``spark.read.format("roost")`` reads ``[startingOffsets, endingOffsets)`` (default:
everything kept), or a time range: ``startingTimestamp`` (inclusive) and
``endingTimestamp`` (exclusive), each milliseconds since the epoch or an ISO-8601
date-time (UTC unless it names a zone), compared with the broker's append time; either
kind of bound may be mixed with the other, not both for one end. Times map to offsets
with one round trip to the broker (``Client.offsets_for_times``). ``startingTimestamp``
also sets where a new streaming query starts.

Writing: ``df.write.format("roost").option("url", …).option("exchange", "")`` (plus
``routingKey``, or a ``routing_key`` column) publishes ``body`` (and the optional
``routing_key``, ``headers``, ``content_type``, ``message_id``, ``correlation_id``
columns) with publisher confirms, as mandatory messages: a missing exchange or queue, a
message that reaches no queue, or a nack fails the task (Spark retries it, then fails
the job) instead of losing rows. Every message carries a producer name and an increasing
``x-publishing-id`` derived from (query id, batch id, partition, row position), so a
retried task's messages are dropped by the stream's deduplication: effectively once.
Spark hands the writer Arrow record batches; to a stream through the default exchange,
rows go as batched publishes (one AMQP message per ``confirmBatch`` rows, each row its
own record: docs/streams.md, "Batched publishing").

Options: url, stream, startingOffsets, endingOffsets, startingTimestamp, endingTimestamp,
maxRecordsPerTrigger, numPartitions (default 2), consumerName (streaming: store committed
offsets on the broker), exchange, routingKey, producerName (batch writes: fixed name for
cross-job dedup), confirmBatch (rows sent between confirm checks, 2000), confirmWindow
(unconfirmed rows allowed in flight, 20000).
"""

from __future__ import annotations

import math
import uuid
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from roost.amqp import codec_methods as m
from roost.pipeline.amqp import Client, RoostError, missing_as, properties
from roost.pipeline.bounds import resolve_offset, time_ms
from roost.pipeline.chunks import (
    BATCH_CONTENT_TYPE,
    BATCH_LENGTH,
    ChunkColumns,
    batch_properties,
)

SCHEMA = (
    "offset long, timestamp timestamp, exchange string, routing_key string, "
    "headers map<string,string>, content_type string, message_id string, "
    "correlation_id string, body binary"
)
# a super stream's rows also name their partition (option superStream)
SUPER_SCHEMA = SCHEMA + ", stream string"
_BATCH_SHIFT = 32  # publishing id = batch id << 32 | row position + 1
CHUNK_BYTES = 128 * 1024  # records per delivery, by size (consumer x-roost-chunk-bytes)


class RoostPartition(InputPartition):
    def __init__(self, stream: str, start: int, end: int) -> None:
        super().__init__((stream, start, end))
        self.stream = stream
        self.start = start
        self.end = end


class Committed(WriterCommitMessage):
    def __init__(self, count: int) -> None:
        self.count = count


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def read_partition(
    url: str,
    partition: RoostPartition,
    batch_rows: int = 8192,
    chunk_bytes: int = CHUNK_BYTES,
    batch_bytes: int = 64 << 20,
    *,
    stream_column: bool = False,
) -> Iterator[Any]:
    """Arrow record batches (much cheaper for Spark than row tuples), from chunked
    deliveries: the broker sends slices of its log, decoded here on the executor,
    column by column (``ChunkColumns``). ``stream_column``: a last column naming the
    partition's stream (super-stream reads, ``pipeline/super_source.py``)."""
    stream = partition.stream if stream_column else None
    with Client(url) as client:
        deliveries = client.read_range(
            partition.stream, partition.start, partition.end, prefetch=16, chunk_bytes=chunk_bytes
        )
        columns = ChunkColumns()
        size = 0
        for d in deliveries:
            columns.add(d.body)
            size += len(d.body)
            if len(columns) >= batch_rows or size >= batch_bytes:
                yield record_batch(columns, stream)
                columns.clear()
                size = 0
    if len(columns):
        yield record_batch(columns, stream)


def record_batch(columns: ChunkColumns, stream: str | None = None) -> Any:
    """The data source's columns (SCHEMA) as one Arrow record batch; with ``stream``,
    and a last column ``stream`` holding it (SUPER_SCHEMA)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    n = len(columns)
    schema = arrow_schema(with_stream=stream is not None)
    offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.offsets)])
    stamps = pa.Array.from_buffers(
        pa.timestamp("ms", tz="UTC"), n, [None, pa.py_buffer(columns.stamps)]
    ).cast(schema.field("timestamp").type)
    ends = array("i", accumulate(map(len, columns.bodies), initial=0))
    bodies = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(ends), pa.py_buffer(b"".join(columns.bodies))]
    )
    runs = [run for run in columns.runs if run[3]]
    counts = [run[3] for run in runs]
    names: list[list[Any]] = [[], [], [], [], []]  # exchange, key, type, message id, corr id
    pairs: list[list[tuple[str, str | None]]] = []
    for exchange, routing_key, props, _count in runs:
        for column, value in zip(
            names, (exchange, routing_key, props[0], props[8], props[5]), strict=True
        ):
            column.append(value)
        headers = props[2]
        pairs.append(
            [(k, v if type(v) is str else _text(v)) for k, v in headers.items()] if headers else []
        )
    if len(runs) == 1:
        strings = [pa.repeat(pa.scalar(values[0], type=pa.string()), n) for values in names]
    else:
        which = array("i")
        for i, count in enumerate(counts):
            which += array("i", (i,)) * count
        take = pa.array(which)
        strings = [pa.array(values, type=pa.string()).take(take) for values in names]
    exchanges, keys, ctypes, mids, cids = strings
    headers_col = _map_column(pairs, counts)
    arrays = [offsets, stamps, exchanges, keys, headers_col, ctypes, mids, cids, bodies]
    if stream is not None:
        arrays.append(pa.repeat(pa.scalar(stream, type=pa.string()), n))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _map_column(pairs: list[list[tuple[str, str | None]]], counts: list[int]) -> Any:
    """A map<string,string> column holding ``pairs[i]`` ``counts[i]`` times over, built
    from its offsets, keys and values (``pa.repeat`` of a map costs microseconds a row)."""
    import pyarrow as pa

    offsets = array("i", (0,))
    keys: list[str] = []
    values: list[str | None] = []
    total = 0
    for run, count in zip(pairs, counts, strict=True):
        width = len(run)
        if not width:
            offsets += array("i", (total,)) * count
            continue
        offsets.extend(range(total + width, total + width * count + 1, width))
        total += width * count
        keys += [k for k, _ in run] * count
        values += [v for _, v in run] * count
    return pa.MapArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)]),
        pa.array(keys, type=pa.string()),
        pa.array(values, type=pa.string()),
    )


def arrow_schema(*, with_stream: bool = False) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("exchange", pa.string()),
            ("routing_key", pa.string()),
            ("headers", pa.map_(pa.string(), pa.string())),
            ("content_type", pa.string()),
            ("message_id", pa.string()),
            ("correlation_id", pa.string()),
            ("body", pa.binary()),
            *([("stream", pa.string())] if with_stream else []),
        ]
    )


def split(stream: str, start: int, end: int, parts: int) -> list[RoostPartition]:
    if end <= start:
        return []
    parts = max(1, min(parts, end - start))
    step = -(-(end - start) // parts)
    return [RoostPartition(stream, s, min(s + step, end)) for s in range(start, end, step)]


class _Options:
    def __init__(self, options: dict[str, str]) -> None:
        # Spark hands options over case-insensitively (lower-cased keys)
        self.options = {k.lower(): v for k, v in options.items()}
        self.url = self.get("url") or ""
        if not self.url:
            raise RoostError("option 'url' is required (amqp://user:pass@host:port/vhost)")
        self.stream = self.get("stream") or ""
        self.parts = int(self.get("numPartitions") or "2")

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.options.get(key.lower(), default)

    def info(self) -> dict[str, Any]:
        with Client(self.url) as client:
            return self._info(client)

    def _info(self, client: Client) -> dict[str, Any]:
        if not self.stream:
            raise RoostError("option 'stream' is required")
        with missing_as(f"no stream '{self.stream}' on the broker"):
            return client.stream_info(self.stream)

    def offsets(self, defaults: dict[str, str]) -> list[int]:
        """One offset per end asked for ("starting", "ending": its default offset spec),
        from that end's Offsets or Timestamp option: one offset query, plus one round trip
        when a timestamp is given."""
        times: dict[str, int] = {}
        for kind in defaults:
            stamp = self.get(f"{kind}Timestamp")
            if stamp is None:
                continue
            if self.get(f"{kind}Offsets") is not None:
                raise RoostError(f"set {kind}Offsets or {kind}Timestamp, not both")
            times[kind] = math.floor(time_ms(stamp))
        with Client(self.url) as client:
            info = self._info(client)
            by_time = (
                client.offsets_for_times(self.stream, info, list(times.values())) if times else []
            )
        found = dict(zip(times, by_time, strict=True))
        return [
            found[kind]
            if kind in found
            else resolve_offset(self.get(f"{kind}Offsets") or default, info)
            for kind, default in defaults.items()
        ]

    def check_target(self) -> bool:
        """Fail on the driver, before any task runs, when the exchange, or (default
        exchange) the queue named by routingKey or stream, does not exist. True when
        rows can go as batched publishes: the target is that queue and a stream."""
        exchange = self.get("exchange") or ""
        queue = "" if exchange else (self.get("routingKey") or self.stream)
        with Client(self.url) as client:
            with missing_as(f"no exchange '{exchange}' to write to"):
                client.check_exchange(exchange)
            if not queue:
                return False  # rows name their queue (routing_key column): mandatory checks
            with missing_as(f"no stream or queue '{queue}' to write to"):
                client.check_queue(queue)
            return client.is_stream(queue)


class RoostBatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.start, self.end = opts.offsets({"starting": "earliest", "ending": "latest"})

    def partitions(self) -> Sequence[InputPartition]:
        return split(self.opts.stream, self.start, self.end, self.opts.parts)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # an empty range has no partitions: Spark then reads one InputPartition(None)
        if isinstance(partition, RoostPartition):
            yield from read_partition(self.opts.url, partition)


class RoostStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        opts.info()  # fail early on a wrong URL, credentials or stream
        max_rows = opts.get("maxRecordsPerTrigger")
        self.max_rows = int(max_rows) if max_rows else 0
        self.target: int | None = None  # Trigger.AvailableNow: read up to here, then stop

    def prepareForTriggerAvailableNow(self) -> None:
        """Without this, Spark reads all of an availableNow query in one batch and ignores
        maxRecordsPerTrigger: the query ends at the stream's end as of now, in batches."""
        self.target = int(self.opts.info()["x-stream-next-offset"])

    def initialOffset(self) -> dict[str, int]:
        (start,) = self.opts.offsets({"starting": "latest"})
        return {"offset": start}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        info = self.opts.info()
        first = int(info["x-stream-first-offset"])
        latest = int(info["x-stream-next-offset"])
        if self.target is not None:
            latest = min(latest, self.target)
        begin = max(int(start["offset"]), first)
        if isinstance(limit, ReadMaxRows):
            latest = min(latest, begin + limit.max_rows)
        return {"offset": max(latest, int(start["offset"]))}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return split(self.opts.stream, int(start["offset"]), int(end["offset"]), self.opts.parts)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, RoostPartition):
            yield from read_partition(self.opts.url, partition)

    def commit(self, end: dict[str, int]) -> None:
        """With ``consumerName``, the processed offset is stored on the broker too (for
        other tools to see progress); Spark's checkpoint stays the source of truth."""
        name = self.opts.get("consumerName")
        if not name or int(end["offset"]) <= 0:
            return
        with Client(self.opts.url) as client:
            client.confirm_select()
            client.publish(
                "amq.roost.offsets",
                self.opts.stream,
                properties(
                    headers={
                        "x-stream-consumer-name": name,
                        "x-stream-offset": int(end["offset"]) - 1,
                    }
                ),
                b"",
            )
            client.flush_confirmed()


_WRITE_COLUMNS = ("body", "routing_key", "headers", "content_type", "message_id", "correlation_id")


def _columns(batch: Any) -> list[list[Any]]:
    """The written columns of an Arrow record batch as Python lists (None for absent
    ones); ``body`` as bytes, whether the column is binary or string."""
    import pyarrow as pa

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


class RoostDataSource(DataSource):
    """The ``roost`` format; see the module docstring for options and columns."""

    @classmethod
    def name(cls) -> str:
        return "roost"

    def schema(self) -> str:
        return SUPER_SCHEMA if self._super() else SCHEMA

    def _super(self) -> bool:
        return any(k.lower() == "superstream" for k in self.options)

    def reader(self, schema: StructType) -> DataSourceReader:
        if self._super():
            from roost.pipeline.super_source import SuperStreamBatchReader

            return SuperStreamBatchReader(_Options(dict(self.options)))
        return RoostBatchReader(_Options(dict(self.options)))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if self._super():
            from roost.pipeline.super_source import SuperStreamReader

            return SuperStreamReader(_Options(dict(self.options)))
        return RoostStreamReader(_Options(dict(self.options)))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return RoostBatchWriter(_Options(dict(self.options)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return RoostStreamWriter(_Options(dict(self.options)))
