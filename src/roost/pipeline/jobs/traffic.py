"""Traffic analytics over a stream: per-window rates, latency percentiles, top keys.

Reads any stream (for example one your publishers write to, or ``roost pipeline
generate``'s), computes per-window message and byte counts per routing key, end-to-end
latency percentiles (broker append time minus the message's ``timestamp`` property, when
publishers set it), and the top routing keys; writes Parquet and an HTML report with
inline SVG charts (no plotting library needed). A batch job over an offset range.
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path
from typing import Any


def analyse(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F

    df = (
        spark.read.format("roost")
        .option("url", args.url)
        .option("stream", args.input)
        .option("startingOffsets", args.starting_offsets)
        .load()
    )
    df = df.withColumn("size", F.length("body"))
    per_window = (
        df.groupBy(F.window("timestamp", args.window).alias("w"), "routing_key")
        .agg(F.count("*").alias("messages"), F.sum("size").alias("bytes"))
        .select(F.col("w.start").alias("window_start"), "routing_key", "messages", "bytes")
        .orderBy("window_start", "routing_key")
    )
    top = (
        df.groupBy("routing_key")
        .agg(F.count("*").alias("messages"))
        .orderBy(F.desc("messages"))
        .limit(10)
    )
    sent = F.col("headers").getItem("sent_ms").cast("double")
    latency = df.select(
        (F.col("timestamp").cast("double") * 1000 - sent).alias("latency_ms")
    ).where(F.col("latency_ms").isNotNull())
    quantiles = (
        latency.approxQuantile("latency_ms", [0.5, 0.95, 0.99], 0.01)
        if (latency.limit(1).count())
        else []
    )
    out = Path(args.output)
    per_window.write.mode("overwrite").parquet(str(out / "per_window"))
    top.write.mode("overwrite").parquet(str(out / "top_keys"))
    result = {
        "per_window": [r.asDict() for r in per_window.collect()],
        "top": [r.asDict() for r in top.collect()],
        "latency": dict(zip(("p50", "p95", "p99"), quantiles, strict=False)),
        "total": df.count(),
    }
    (out / "report.html").write_text(render(args.input, result))
    return result


def _bars(title: str, items: list[tuple[str, float]]) -> str:
    if not items:
        return f"<h2>{html.escape(title)}</h2><p>no data</p>"
    top = max(v for _, v in items) or 1
    rows = []
    for i, (label, value) in enumerate(items):
        width = 400 * value / top
        y = i * 22
        rows.append(
            f'<text x="0" y="{y + 15}" font-size="12">{html.escape(label)}</text>'
            f'<rect x="180" y="{y + 3}" width="{width:.1f}" height="16" fill="#3b7dd8"/>'
            f'<text x="{185 + width:.1f}" y="{y + 15}" font-size="12">{value:g}</text>'
        )
    return (
        f"<h2>{html.escape(title)}</h2><svg width='680' height='{22 * len(items) + 6}'>"
        + "".join(rows)
        + "</svg>"
    )


def render(stream: str, r: dict[str, Any]) -> str:
    windows: dict[str, float] = {}
    for row in r["per_window"]:
        key = str(row["window_start"])
        windows[key] = windows.get(key, 0) + row["messages"]
    lat = r["latency"]
    latency = ", ".join(f"{k} {v:.1f} ms" for k, v in lat.items()) or "no timestamps set"
    return (
        "<!doctype html><meta charset='utf-8'><title>Roost traffic</title>"
        "<body style='font-family:sans-serif;max-width:760px;margin:2em auto'>"
        f"<h1>Traffic on stream {html.escape(stream)}</h1>"
        f"<p>{r['total']} messages. End-to-end latency: {html.escape(latency)}.</p>"
        + _bars("Messages per window", list(windows.items()))
        + _bars(
            "Top routing keys", [(t["routing_key"] or "(none)", t["messages"]) for t in r["top"]]
        )
        + "</body>"
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", default="orders", help="stream to analyse")
    p.add_argument("--output", default="roost-traffic", help="Parquet + report.html here")
    p.add_argument("--window", default="1 minute")
