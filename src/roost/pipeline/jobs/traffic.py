"""Broker traffic analytics: the broker's own events in, rates, latencies, top keys out.

Reads the events stream that ``roost server --events-stream NAME`` fills (one per vhost;
the URL's vhost picks it), and computes per window (``--window``, tumbling, event time):
per-queue publish/deliver/ack rates in msg/s, end-to-end and delivery latency
percentiles (p50/p95/p99, exact), and the top routing keys. Writes Parquet
(``events``, ``rates``, ``latency``, ``latency_all``, ``top_keys``), ``summary.json`` and
``report.html`` with PNG charts under ``--output``, printing each step's progress (and
Spark's task counts) to stderr.

Batch by default, over an offset range (``--starting-offsets``/``--ending-offsets``) and
optionally a time range (``--since``/``--until``), of which it reads only the messages
holding that range (traffic_range.py). ``--streaming`` instead ingests new
events with a streaming query (``availableNow`` trigger, checkpoint under ``--output``),
appending to the ``events`` Parquet table, so repeated runs read each event once and the
report covers everything ingested so far.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from roost.pipeline.amqp import Client, ClientError, RoostError, endpoint, missing_as
from roost.pipeline.bounds import resolve_offset, time_ms
from roost.pipeline.jobs import traffic_range
from roost.pipeline.jobs import traffic_stats as stats
from roost.pipeline.progress import Progress

STEPS = 6
DEFAULT_STREAM = "roost.events"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", default=DEFAULT_STREAM,
                   help="the events stream (the broker's --events-stream)")
    p.add_argument("--output", default="roost-traffic",
                   help="directory for the Parquet tables, summary.json and report.html")
    p.add_argument("--window", default="1 minute",
                   help="window length, as Spark says it: '10 seconds', '1 minute', '1 hour'")
    p.add_argument("--top", type=int, default=10, help="routing keys kept per window")
    p.add_argument("--ending-offsets", default="latest", help="batch: stop before this offset")
    p.add_argument("--since", default=None,
                   help="only events at or after this time (ISO 8601, UTC if no zone, or ms)")
    p.add_argument("--until", default=None, help="only events before this time")
    p.add_argument("--streaming", action="store_true",
                   help="ingest new events incrementally (availableNow) instead of a batch read")
    p.add_argument("--checkpoint", default=None,
                   help="--streaming's checkpoint (default OUTPUT/checkpoint)")  # fmt: skip


def window_seconds(spark: Any, window: str) -> float:
    """The window's length; a window Spark cannot read fails here, before any work."""
    from pyspark.sql import functions as F

    w = F.window(F.lit(datetime.datetime(2000, 1, 1)), window)
    row = spark.range(1).select(w.alias("w")).select(
        (F.unix_micros("w.end") - F.unix_micros("w.start")).alias("us")
    ).first()
    return float(row["us"]) / 1e6


def _stream_info(url: str, stream: str) -> dict[str, Any]:
    missing = (
        f"no stream '{stream}' in vhost '{endpoint(url).vhost}': start the "
        f"broker with --events-stream {stream} (and make some traffic)"
    )
    with missing_as(missing), Client(url) as client:
        return client.stream_info(stream)


def _batch_range(
    args: argparse.Namespace, info: dict[str, Any], since: float | None, until: float | None
) -> tuple[int, int]:
    """The offsets a batch run reads: --starting/--ending-offsets, narrowed to the
    messages that hold --since to --until (traffic_range.py) when a time is given."""
    start = resolve_offset(args.starting_offsets, info)
    end = resolve_offset(args.ending_offsets, info)
    if since is None and until is None:
        return start, end
    with Client(args.url) as client:
        return traffic_range.offsets(client, args.input, info, start, end, since, until)


def _ingest(
    spark: Any, args: argparse.Namespace, events_dir: Path, batch: tuple[int, int]
) -> None:
    """The events stream, parsed, into the ``events`` Parquet table: new events
    (--streaming), or the offsets ``batch``."""
    if args.streaming:
        source = (
            spark.readStream.format("roost")
            .option("url", args.url)
            .option("stream", args.input)
            .option("startingOffsets", args.starting_offsets)
            .load()
        )
        checkpoint = args.checkpoint or str(Path(args.output) / "checkpoint")
        query = (
            stats.parse(source)
            .writeStream.queryName("traffic-ingest")
            .format("parquet")
            .option("path", str(events_dir))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"ingest failed: {query.exception()}")
        return
    source = (
        spark.read.format("roost")
        .option("url", args.url)
        .option("stream", args.input)
        .option("startingOffsets", str(batch[0]))
        .option("endingOffsets", str(batch[1]))
        .load()
    )
    stats.parse(source).write.mode("overwrite").parquet(str(events_dir))


def _rows(df: Any) -> list[dict[str, Any]]:
    """Collected rows; window bounds as UTC datetimes (PySpark hands out local ones)."""
    out = []
    for row in df.collect():
        d = row.asDict()
        for key in ("window_start", "window_end"):
            if isinstance(d.get(key), datetime.datetime):
                d[key] = datetime.datetime.fromtimestamp(d[key].timestamp(), datetime.UTC)
        out.append(d)
    return out


def analyse(spark: Any, args: argparse.Namespace, out: TextIO | None = None) -> dict[str, Any]:
    """Run the whole job; returns what the report shows (and writes everything)."""
    from pyspark.sql import functions as F

    from roost.pipeline.jobs import traffic_report

    output = Path(args.output)
    events_dir = output / "events"
    progress = Progress(spark, "traffic", STEPS, out)
    seconds = window_seconds(spark, args.window)
    since = time_ms(args.since) if args.since else None
    until = time_ms(args.until) if args.until else None
    with progress:
        info = _stream_info(args.url, args.input)
        if args.streaming:
            first, end = info["x-stream-first-offset"], info["x-stream-next-offset"]
            mode = "new events (streaming, availableNow)"
        else:
            first, end = _batch_range(args, info, since, until)
            mode = "a batch"
        timed = since is not None or until is not None
        progress.step(f"reading stream '{args.input}' as {mode}: offsets {first} to {end}, "
                      f"{end - first:,} messages"
                      + (f" (events from {_when(since)} to {_when(until)})" if timed else ""))
        _ingest(spark, args, events_dir, (first, end))
        events = spark.read.parquet(str(events_dir))
        if timed:
            read = events.count()  # in batch mode, the events of the offsets just read
        if since is not None:
            events = events.where(F.col("ts") >= since)
        if until is not None:
            events = events.where(F.col("ts") < until)
        events = events.cache()
        if timed:
            how = "ingested so far" if args.streaming else "read"
            progress.done(f"{events.count():,} events in the time range, of {read:,} {how}, "
                          f"in {events_dir}")
        else:
            progress.done(f"{events.count():,} events in {events_dir}")

        progress.step("counting events per type")
        summary = stats.counts(events)
        by_type = ", ".join(f"{v:,} {k}" for k, v in sorted(summary["by_type"].items()))
        progress.done(by_type or "no events")

        progress.step(f"per-queue rates in {args.window} windows")
        rates_df = stats.rates(events, args.window)
        rates_df.write.mode("overwrite").parquet(str(output / "rates"))
        rates = _rows(spark.read.parquet(str(output / "rates")).orderBy("window_start", "queue"))
        progress.done(f"{len(rates):,} rows (window, queue)")

        progress.step("latency percentiles (published to acked, and to delivered)")
        lat = stats.latencies(events).cache()
        stats.latency(lat, args.window, per_queue=True).write.mode("overwrite").parquet(
            str(output / "latency")
        )
        stats.latency(lat, args.window, per_queue=False).write.mode("overwrite").parquet(
            str(output / "latency_all")
        )
        latency_all = _rows(
            spark.read.parquet(str(output / "latency_all")).orderBy("window_start")
        )
        by_queue = _rows(stats.latency_overall(lat, per_queue=True))
        overall = stats.latency_overall(lat, per_queue=False).first().asDict()
        lat.unpersist()
        progress.done(f"{overall['messages']:,} messages acknowledged in range; p50 "
                      f"{traffic_report._ms(overall['e2e_p50_ms'])}, p99 "
                      f"{traffic_report._ms(overall['e2e_p99_ms'])}")

        progress.step(f"top {args.top} routing keys per window")
        stats.top_keys(events, args.window, args.top).write.mode("overwrite").parquet(
            str(output / "top_keys")
        )
        top_keys = _rows(
            spark.read.parquet(str(output / "top_keys")).orderBy("window_start", "rank")
        )
        top_overall = _rows(stats.top_keys_overall(events, args.top))
        progress.done(f"{len(top_keys):,} rows (window, rank)")
        events.unpersist()

        progress.step("writing the report")
        result: dict[str, Any] = {
            "stream": args.input,
            "where": _where(args.url),
            "window": args.window,
            "window_seconds": seconds,
            "summary": summary,
            "rates": rates,
            "latency_all": latency_all,
            "latency_by_queue": by_queue,
            "latency_overall": overall,
            "top_keys": top_keys,
            "top_keys_overall": top_overall,
        }
        page = traffic_report.render(result, output)
        (output / "report.html").write_text(page)
        (output / "summary.json").write_text(
            json.dumps(
                {k: result[k] for k in ("stream", "window", "summary", "latency_overall",
                                        "latency_by_queue", "top_keys_overall")},
                indent=2,
                default=str,
            )
        )
        progress.done(f"{len(result['charts'])} charts in {output / 'charts'}")
        progress.finish(f"done: {output / 'report.html'}")
    return result


def _when(ms: float | None) -> str:
    if ms is None:
        return "any time"
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _where(url: str) -> str:
    ep = endpoint(url)
    return f"{ep.host}:{ep.port}, vhost {ep.vhost}"


def run(spark: Any, args: argparse.Namespace) -> int:
    """``roost pipeline traffic``: the job, with a one-line error for what users get wrong."""
    try:
        result = analyse(spark, args)
    except (RoostError, ClientError, ValueError) as exc:
        print(f"traffic: {exc}", file=sys.stderr)
        return 2
    s = result["summary"]
    print(
        f"traffic: {s['events']:,} events, "
        f"{s['by_type'].get('message.published', 0):,} messages published; "
        f"report at {Path(args.output) / 'report.html'}",
        file=sys.stderr,
    )
    return 0
