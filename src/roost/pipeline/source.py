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

On a cluster, ``url`` may list several nodes' URLs separated by commas: a lost
connection or a node that cannot serve the call moves it to the next node, and a cut-off
partition read resumes there after its last record (``pipeline/failover.py``;
``failoverTimeout`` seconds, default 60, bounds the retrying).

Options: url, failoverTimeout, stream, startingOffsets, endingOffsets, startingTimestamp,
endingTimestamp, maxRecordsPerTrigger, numPartitions (default 2), consumerName
(streaming: store committed offsets on the broker), exchange, routingKey, producerName
(batch writes: fixed name for cross-job dedup), confirmBatch (rows sent between confirm
checks, 2000), confirmWindow (unconfirmed rows allowed in flight, 20000).
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from roost.pipeline.options import _Options
from roost.pipeline.reading import RoostBatchReader, RoostStreamReader
from roost.pipeline.writing import RoostBatchWriter, RoostStreamWriter

SCHEMA = (
    "offset long, timestamp timestamp, exchange string, routing_key string, "
    "headers map<string,string>, content_type string, message_id string, "
    "correlation_id string, body binary"
)
# a super stream's rows also name their partition (option superStream)
SUPER_SCHEMA = SCHEMA + ", stream string"


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
