"""Reading a stream: its offset range split into partitions, each read by an executor over
its own connection, in batch (``RoostBatchReader``) and streaming
(``RoostStreamReader``) queries."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from roost.pipeline.amqp import Client, RoostError, endpoint, properties
from roost.pipeline.chunks import ChunkColumns
from roost.pipeline.failover import Nodes
from roost.pipeline.options import _Options
from roost.pipeline.record_batches import record_batch

CHUNK_BYTES = 128 * 1024  # records per delivery, by size (consumer x-roost-chunk-bytes)

class RoostPartition(InputPartition):
    def __init__(self, stream: str, start: int, end: int) -> None:
        super().__init__((stream, start, end))
        self.stream = stream
        self.start = start
        self.end = end



def read_partition(
    url: str,
    partition: RoostPartition,
    batch_rows: int = 8192,
    chunk_bytes: int = CHUNK_BYTES,
    batch_bytes: int = 64 << 20,
    *,
    stream_column: bool = False,
    nodes: Nodes | None = None,
) -> Iterator[Any]:
    """Arrow record batches (much cheaper for Spark than row tuples), from chunked
    deliveries: the broker sends slices of its log, decoded here on the executor,
    column by column (``ChunkColumns``). ``stream_column``: a last column naming the
    partition's stream (super-stream reads, ``pipeline/super_source.py``).

    With several nodes in ``url``, a lost connection or a node that refuses is not the
    end of the task: the read goes on at the next node from the offset after the last
    record received, so the partition's rows are still each offset once, in order."""
    stream = partition.stream if stream_column else None
    nodes = nodes or Nodes(url)
    start, end = partition.start, partition.end
    columns = ChunkColumns()
    size = 0
    resumed_at = -1  # after a failover: where the next node's first record must be
    while start < end:
        try:
            with nodes.client() as client:
                deliveries = client.read_range(
                    partition.stream, start, end, prefetch=16, chunk_bytes=chunk_bytes
                )
                for d in deliveries:
                    columns.add(d.body)
                    size += len(d.body)
                    if resumed_at >= 0:
                        check_resumed(columns, resumed_at, start, nodes.url)
                        resumed_at = -1
                    if len(columns) >= batch_rows or size >= batch_bytes:
                        start = columns.offsets[-1] + 1
                        yield record_batch(columns, stream)
                        columns.clear()
                        size = 0
            break
        except Exception as exc:  # nodes.failed re-raises the rest
            nodes.failed(exc)
            if len(columns):
                start = columns.offsets[-1] + 1
            resumed_at = len(columns)
    nodes.succeeded()
    if len(columns):
        yield record_batch(columns, stream)


def check_resumed(columns: ChunkColumns, at: int, offset: int, url: str) -> None:
    """The first record read after a failover must be the one asked for: a record
    twice or one missing would break the query's exactly-once output."""
    if len(columns) > at and columns.offsets[at] != offset:
        raise RoostError(
            f"after a failover {endpoint(url).host}:{endpoint(url).port} sent offset"
            f" {columns.offsets[at]} where {offset} was asked for"
        )


def split(stream: str, start: int, end: int, parts: int) -> list[RoostPartition]:
    if end <= start:
        return []
    parts = max(1, min(parts, end - start))
    step = -(-(end - start) // parts)
    return [RoostPartition(stream, s, min(s + step, end)) for s in range(start, end, step)]



class RoostBatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.start, self.end = opts.offsets({"starting": "earliest", "ending": "latest"})

    def partitions(self) -> Sequence[InputPartition]:
        return split(self.opts.stream, self.start, self.end, self.opts.parts)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # an empty range has no partitions: Spark then reads one InputPartition(None)
        if isinstance(partition, RoostPartition):
            yield from read_partition(self.opts.url, partition, nodes=self.opts.nodes())


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
            yield from read_partition(self.opts.url, partition, nodes=self.opts.nodes())

    def commit(self, end: dict[str, int]) -> None:
        """With ``consumerName``, the processed offset is stored on the broker too (for
        other tools to see progress); Spark's checkpoint stays the source of truth."""
        name = self.opts.get("consumerName")
        if not name or int(end["offset"]) <= 0:
            return

        def store(client: Client) -> None:
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

        self.opts.nodes().run(store)

