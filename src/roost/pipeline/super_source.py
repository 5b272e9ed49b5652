"""Reading a super stream (option ``superStream``) in parallel: one Spark input partition
per partition stream, each read by its own task over its own connection, and offsets kept
per partition, so a restarted query resumes every partition exactly where it stopped.

    df = (spark.readStream.format("roost")
          .option("url", "amqp://guest:guest@127.0.0.1:5672/%2F")
          .option("superStream", "orders")              # partitions orders-0, orders-1, …
          .option("streamPort", 5552)                   # where to ask for the partitions
          .option("startingOffsets", "earliest")        # each partition's
          .option("maxRecordsPerTrigger", 100000)       # split over the partitions
          .load())

The partitions are found with the stream protocol's Partitions command
(``pipeline/superstream.py``), as every stream client finds them; they are then read
over AMQP like any stream (``source.read_partition``). Rows have the columns of a
stream read plus ``stream``, the partition's name: ``(stream, offset)`` is a row's
identity. The checkpoint's offset is ``{"offsets": {"orders-0": N, …}}``: the next
offset to read in each partition. ``startingOffsets``/``endingOffsets`` (earliest,
latest or a number) and ``startingTimestamp``/``endingTimestamp`` apply to every
partition. ``maxRecordsPerTrigger`` is shared out evenly: each partition reads at most
its share in a micro-batch (the first ``max % n`` partitions one more).
"""

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

from roost.pipeline.amqp import Client, RoostError, missing_as, properties
from roost.pipeline.options import _Options
from roost.pipeline.reading import RoostPartition, read_partition
from roost.pipeline.superstream import DEFAULT_STREAM_PORT, partitions


def find_partitions(opts: _Options) -> list[str]:
    name = opts.get("superStream") or ""
    if opts.get("stream"):
        raise RoostError("set stream or superStream, not both")
    return partitions(opts.url, name, int(opts.get("streamPort") or DEFAULT_STREAM_PORT))


def _of(opts: _Options, stream: str) -> _Options:
    """The options as one partition's stream read would have them."""
    return _Options({**opts.options, "stream": stream})


def stream_infos(url: str, streams: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each partition's first and next offsets, over one connection."""
    with Client(url) as client:
        out = {}
        for stream in streams:
            with missing_as(f"no partition stream '{stream}' on the broker"):
                out[stream] = client.stream_info(stream)
        return out


def shares(max_rows: int, n: int) -> list[int]:
    """``max_rows`` split over ``n`` partitions: the first ``max_rows % n`` one more."""
    base, extra = divmod(max_rows, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


class SuperStreamBatchReader(DataSourceReader):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.ranges = []
        for stream in find_partitions(opts):
            start, end = _of(opts, stream).offsets({"starting": "earliest", "ending": "latest"})
            self.ranges.append((stream, start, end))

    def partitions(self) -> Sequence[InputPartition]:
        return [RoostPartition(s, start, end) for s, start, end in self.ranges if end > start]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, RoostPartition):  # none at all: Spark reads one None
            yield from read_partition(self.opts.url, partition, stream_column=True)


class SuperStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: _Options) -> None:
        self.opts = opts
        self.streams = find_partitions(opts)
        stream_infos(opts.url, self.streams)  # fail early on a missing partition
        max_rows = opts.get("maxRecordsPerTrigger")
        self.max_rows = int(max_rows) if max_rows else 0
        self.target: dict[str, int] | None = None  # Trigger.AvailableNow: up to here

    def prepareForTriggerAvailableNow(self) -> None:
        infos = stream_infos(self.opts.url, self.streams)
        self.target = {s: int(info["x-stream-next-offset"]) for s, info in infos.items()}

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return {"offsets": {s: _of(self.opts, s).offsets({"starting": "latest"})[0]
                            for s in self.streams}}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        infos = stream_infos(self.opts.url, self.streams)
        caps: list[int | None] = [None] * len(self.streams)
        if isinstance(limit, ReadMaxRows):
            caps = list(shares(limit.max_rows, len(self.streams)))
        out = {}
        for stream, cap in zip(self.streams, caps, strict=True):
            info = infos[stream]
            at = int(start["offsets"].get(stream, info["x-stream-first-offset"]))
            latest = int(info["x-stream-next-offset"])
            if self.target is not None:
                latest = min(latest, self.target[stream])
            begin = max(at, int(info["x-stream-first-offset"]))
            if cap is not None:
                latest = min(latest, begin + cap)
            out[stream] = max(latest, at)
        return {"offsets": out}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = start["offsets"], end["offsets"]
        return [RoostPartition(s, int(first.get(s, 0)), int(last[s])) for s in self.streams
                if int(last[s]) > int(first.get(s, 0))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if isinstance(partition, RoostPartition):
            yield from read_partition(self.opts.url, partition, stream_column=True)

    def commit(self, end: dict[str, Any]) -> None:
        """With ``consumerName``, each partition's processed offset is stored on the
        broker too (Spark's checkpoint stays the source of truth)."""
        name = self.opts.get("consumerName")
        done = {s: int(n) for s, n in end["offsets"].items() if int(n) > 0}
        if not name or not done:
            return
        with Client(self.opts.url) as client:
            client.confirm_select()
            for stream, offset in done.items():
                client.publish("amq.roost.offsets", stream, properties(headers={
                    "x-stream-consumer-name": name, "x-stream-offset": offset - 1}), b"")
            client.flush_confirmed()
