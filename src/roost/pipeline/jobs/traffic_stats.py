"""The traffic job's computations, DataFrame in, DataFrame out (no I/O here).

Input: rows of the events stream as the ``roost`` source reads them. ``parse`` turns each
message (a JSON array of events, see docs/streams.md) into one row per event; the rest
work on those rows, in tumbling windows of event time (the broker's ``ts``).

Latency is measured per message and queue, joining the ``message.published`` event
(whose ``queues`` map gives the message's sequence number in each queue) with the same
(run, queue, seq) in ``message.delivered`` and ``message.acked``:

- end-to-end: published -> acknowledged (the first ack; a delivery with ``auto_ack``
  counts as acknowledged when delivered). It covers queueing, delivery and the
  consumer's work, which is what a publisher waits for.
- delivery: published -> first delivered (the time spent queued).

Both are attributed to the window in which the message was acknowledged. Messages
published before the analysed range, recovered after a restart (queue numbers restart
with the broker: ``run`` tells runs apart) or never acknowledged have no latency.

Per-window tables come out unsorted: the job writes them to Parquet, which keeps no
order, and sorts what it reads back (traffic.py); sorting before the write too cost a
shuffle for nothing.
"""

from __future__ import annotations

from typing import Any

PUBLISHED = "message.published"
DELIVERED = "message.delivered"
ACKED = "message.acked"
REJECTED = "message.rejected"
DEAD_LETTERED = "message.dead_lettered"
PERCENTILES = (0.5, 0.95, 0.99)

# every field an event may have (docs/streams.md); absent ones read as null
EVENT_FIELDS = (
    ("type", "string"), ("ts", "double"), ("exchange", "string"), ("routing_key", "string"),
    ("queues", "map<string,long>"), ("routed", "long"), ("size", "long"),
    ("persistent", "boolean"), ("message_id", "string"), ("timestamp", "long"),
    ("queue", "string"), ("seq", "long"), ("consumer", "string"), ("redelivered", "boolean"),
    ("auto_ack", "boolean"), ("requeue", "boolean"), ("reason", "string"),
    ("connection", "string"), ("peer", "string"), ("user", "string"), ("protocol", "string"),
    ("client", "string"),
    ("recv_oct", "long"), ("send_oct", "long"), ("duration_ms", "double"), ("kind", "string"),
)  # fmt: skip
EVENTS_SCHEMA = "array<struct<" + ",".join(f"{n}:{t}" for n, t in EVENT_FIELDS) + ">>"


def parse(df: Any) -> Any:
    """One row per event: the event's fields, ``time`` (a timestamp from ``ts``), the
    message's ``offset`` and the broker's ``run``. Messages that are not the broker's
    event batches (anything else published to the stream) are skipped."""
    from pyspark.sql import functions as F

    batches = df.where(F.col("headers").getItem("x-roost-events").isNotNull())
    exploded = batches.select(
        F.col("offset"),
        F.col("headers").getItem("x-roost-run").cast("long").alias("run"),
        F.explode(F.from_json(F.col("body").cast("string"), EVENTS_SCHEMA)).alias("e"),
    )
    return exploded.select("offset", "run", "e.*").withColumn(
        "time", F.timestamp_micros((F.col("ts") * 1000).cast("long"))
    )


def _window(duration: str) -> Any:
    from pyspark.sql import functions as F

    return F.window("time", duration)


def _window_columns(w: Any) -> list[Any]:
    from pyspark.sql import functions as F

    return [F.col(f"{w}.start").alias("window_start"), F.col(f"{w}.end").alias("window_end")]


def published_per_queue(events: Any) -> Any:
    """One row per (published message, queue that took it): run, queue, seq, ts, size."""
    from pyspark.sql import functions as F

    return events.where(F.col("type") == PUBLISHED).select(
        "run", "time", "ts", "size", "exchange", "routing_key",
        F.explode("queues").alias("queue", "seq"),
    )


def rates(events: Any, window: str) -> Any:
    """Per window and queue: messages published (into the queue), delivered, acked,
    rejected and dead-lettered (from it), bytes published, and the rates in msg/s
    (count / window length)."""
    from pyspark.sql import functions as F

    own = events.where(F.col("type").isin(DELIVERED, ACKED, REJECTED, DEAD_LETTERED)).select(
        "time", "queue", "type", "size"
    )
    into = published_per_queue(events).select("time", "queue", F.lit(PUBLISHED).alias("type"),
                                               "size")
    both = own.unionByName(into)

    def count(kind: str) -> Any:
        return F.count_if(F.col("type") == kind)

    out = (
        both.groupBy(_window(window).alias("w"), "queue")
        .agg(
            count(PUBLISHED).alias("published"),
            count(DELIVERED).alias("delivered"),
            count(ACKED).alias("acked"),
            count(REJECTED).alias("rejected"),
            count(DEAD_LETTERED).alias("dead_lettered"),
            F.coalesce(F.sum(F.when(F.col("type") == PUBLISHED, F.col("size"))), F.lit(0))
            .alias("bytes_published"),
        )
        .select(*_window_columns("w"), "queue", "published", "delivered", "acked", "rejected",
                "dead_lettered", "bytes_published")
    )
    seconds = F.unix_seconds("window_end") - F.unix_seconds("window_start")
    for name, column in (
        ("publish_rate", "published"), ("deliver_rate", "delivered"), ("ack_rate", "acked")
    ):
        out = out.withColumn(name, F.col(column) / seconds)
    return out


def latencies(events: Any) -> Any:
    """One row per acknowledged message and queue: queue, acked ``time``, ``e2e_ms``
    (published -> acked) and ``delivery_ms`` (published -> first delivered)."""
    from pyspark.sql import functions as F

    keys = ["run", "queue", "seq"]
    published = published_per_queue(events).select(*keys, F.col("ts").alias("published_ts"))
    delivered = (
        events.where(F.col("type") == DELIVERED)
        .groupBy(*keys)
        .agg(F.min("ts").alias("delivered_ts"))
    )
    settled = events.where(
        (F.col("type") == ACKED) | ((F.col("type") == DELIVERED) & F.col("auto_ack"))
    )
    acked = settled.groupBy(*keys).agg(F.min("ts").alias("acked_ts"))
    joined = published.join(acked, keys).join(delivered, keys, "left")
    return joined.select(
        "queue",
        F.timestamp_micros((F.col("acked_ts") * 1000).cast("long")).alias("time"),
        (F.col("acked_ts") - F.col("published_ts")).alias("e2e_ms"),
        (F.col("delivered_ts") - F.col("published_ts")).alias("delivery_ms"),
    )


def _latency_aggregates() -> list[Any]:
    from pyspark.sql import functions as F

    e2e = F.percentile("e2e_ms", list(PERCENTILES))
    delivery = F.percentile("delivery_ms", list(PERCENTILES))
    return [
        F.count("*").alias("messages"),
        e2e.getItem(0).alias("e2e_p50_ms"),
        e2e.getItem(1).alias("e2e_p95_ms"),
        e2e.getItem(2).alias("e2e_p99_ms"),
        F.max("e2e_ms").alias("e2e_max_ms"),
        delivery.getItem(0).alias("delivery_p50_ms"),
        delivery.getItem(1).alias("delivery_p95_ms"),
        delivery.getItem(2).alias("delivery_p99_ms"),
    ]


def latency(lat: Any, window: str, *, per_queue: bool) -> Any:
    """Exact percentiles (linear interpolation, as numpy's default) per window, and per
    queue too with ``per_queue``."""
    queue = ["queue"] if per_queue else []
    out = lat.groupBy(_window(window).alias("w"), *queue).agg(*_latency_aggregates())
    names = [c for c in out.columns if c not in ("w", "queue")]
    return out.select(*_window_columns("w"), *queue, *names)


def latency_overall(lat: Any, *, per_queue: bool) -> Any:
    """The same percentiles over the whole range (per queue with ``per_queue``)."""
    grouped = lat.groupBy("queue") if per_queue else lat.groupBy()
    out = grouped.agg(*_latency_aggregates())
    return out.orderBy("queue") if per_queue else out


def top_keys(events: Any, window: str, n: int) -> Any:
    """Per window, the ``n`` routing keys (with their exchange) with the most publishes;
    ties broken by exchange then key, so the answer is the same every run."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_key = (
        events.where(F.col("type") == PUBLISHED)
        .groupBy(_window(window).alias("w"), "exchange", "routing_key")
        .agg(F.count("*").alias("messages"), F.sum("size").alias("bytes"))
    )
    order = Window.partitionBy("w").orderBy(F.desc("messages"), "exchange", "routing_key")
    ranked = per_key.withColumn("rank", F.row_number().over(order)).where(F.col("rank") <= n)
    return ranked.select(
        *_window_columns("w"), "rank", "exchange", "routing_key", "messages", "bytes"
    )


def top_keys_overall(events: Any, n: int) -> Any:
    from pyspark.sql import functions as F

    return (
        events.where(F.col("type") == PUBLISHED)
        .groupBy("exchange", "routing_key")
        .agg(F.count("*").alias("messages"), F.sum("size").alias("bytes"))
        .orderBy(F.desc("messages"), "exchange", "routing_key")
        .limit(n)
    )


def counts(events: Any) -> dict[str, Any]:
    """Totals for the report's summary: events per type, time range (of all events, and
    of message events only), bytes published, unroutable publishes."""
    from pyspark.sql import functions as F

    message = F.when(F.col("type").startswith("message."), F.col("ts"))
    row = events.agg(
        F.count("*").alias("events"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        F.min(message).alias("first_message_ts"),
        F.max(message).alias("last_message_ts"),
        F.coalesce(F.sum(F.when(F.col("type") == PUBLISHED, F.col("size"))), F.lit(0))
        .alias("bytes_published"),
        F.count_if((F.col("type") == PUBLISHED) & (F.col("routed") == 0)).alias("unroutable"),
    ).first()
    by_type = {r["type"]: r["count"] for r in events.groupBy("type").count().collect()}
    return {**row.asDict(), "by_type": by_type}
