"""Stream ETL: JSON orders in, per-key event-time window totals out.

Reads ``{"id", "key", "amount", "ts"}`` JSON messages (``ts`` in epoch seconds) from a
stream; invalid ones (unparseable, missing fields, negative amount) go to a dead-letter
stream with the reason in a header; valid ones are summed per key in tumbling event-time
windows with a watermark (append mode: a window is emitted once the watermark passes its
end) and written to a results stream and to Parquet. Every sink has its own checkpoint
under ``--checkpoint``; restarted jobs resume exactly, and stream sinks deduplicate.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

ORDER_SCHEMA = "id string, key string, amount double, ts double"


def build(spark: Any, args: argparse.Namespace) -> list[Any]:
    from pyspark.sql import functions as F

    from roost.pipeline.amqp import Client

    # the roost sink fails on a missing target (it never drops rows): make the outputs
    with Client(args.url) as client:
        client.ensure_stream(args.dead_letter)
        if not args.exchange:
            client.ensure_stream(args.results)

    src = (
        spark.readStream.format("roost")
        .option("url", args.url)
        .option("stream", args.input)
        .option("startingOffsets", args.starting_offsets)
        .load()
    )
    parsed = src.select(
        F.col("offset"),
        F.col("body"),
        F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o"),
    )
    invalid_reason = (
        # from_json yields all-null fields for unparseable text (PERMISSIVE mode)
        F.when(F.col("o").isNull() | F.col("o.id").isNull(), F.lit("not JSON"))
        .when(
            F.col("o.key").isNull() | F.col("o.amount").isNull() | F.col("o.ts").isNull(),
            F.lit("missing field"),
        )
        .when(F.col("o.amount") < 0, F.lit("negative amount"))
    )
    checked = parsed.withColumn("reason", invalid_reason)
    checkpoint = Path(args.checkpoint)
    trigger = {"availableNow": True} if args.once else {"processingTime": "2 seconds"}

    dead = checked.where(F.col("reason").isNotNull()).select(
        F.col("body"),
        F.create_map(F.lit("x-invalid-reason"), F.col("reason")).alias("headers"),
    )
    q_dead = (
        dead.writeStream.queryName("etl-dead-letter")
        .format("roost")
        .option("url", args.url)
        .option("stream", args.dead_letter)
        .option("checkpointLocation", str(checkpoint / "dead"))
        .trigger(**trigger)
        .start()
    )

    valid = checked.where(F.col("reason").isNull()).select(
        F.col("o.key").alias("key"),
        F.col("o.amount").alias("amount"),
        F.timestamp_seconds(F.col("o.ts")).alias("event_time"),
    )
    totals = (
        valid.withWatermark("event_time", args.watermark)
        .groupBy(F.window("event_time", args.window), F.col("key"))
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "key",
            "orders",
            "total",
        )
    )
    q_parquet = (
        totals.writeStream.queryName("etl-parquet")
        .format("parquet")
        .outputMode("append")
        .option("path", str(Path(args.output)))
        .option("checkpointLocation", str(checkpoint / "parquet"))
        .trigger(**trigger)
        .start()
    )
    q_results = (
        totals.select(
            F.to_json(F.struct("window_start", "window_end", "key", "orders", "total")).alias(
                "body"
            ),
            F.col("key").alias("routing_key") if args.exchange else F.lit(None).alias("x"),
        )
        .drop("x")
        .writeStream.queryName("etl-results")
        .format("roost")
        .outputMode("append")
        .option("url", args.url)
        .option("stream", args.results)
        .option("exchange", args.exchange)
        .option("checkpointLocation", str(checkpoint / "results"))
        .trigger(**trigger)
        .start()
    )
    return [q_dead, q_parquet, q_results]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", default="orders", help="stream of JSON orders")
    p.add_argument("--dead-letter", default="orders.invalid", help="stream for invalid ones")
    p.add_argument("--results", default="orders.totals", help="stream for window totals")
    p.add_argument("--exchange", default="", help="publish totals here instead (key = key)")
    p.add_argument("--output", default="roost-etl/totals", help="Parquet directory")
    p.add_argument("--window", default="10 seconds")
    p.add_argument("--watermark", default="10 seconds")
