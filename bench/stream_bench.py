"""Stream throughput: publish (1 KiB, confirms) into a stream, replay it, and Spark's read
and write rows/s through the ``roost`` data source on local[2].

    .venv/bin/python bench/stream_bench.py [--messages 100000] [--runs 3] [--no-spark]
                                           [--warmup N]

Each figure is the median of ``--runs`` runs against a fresh ``roost server``, after one
unmeasured Spark read and write of ``--warmup`` messages (default: as many as a run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from _brokers import roost

from roost.pipeline.amqp import Client, properties


def publish(url: str, stream: str, n: int, size: int, batch: int = 2000) -> float:
    body = bytes(size)
    props = properties(delivery_mode=2)
    with Client(url) as c:
        c.declare_stream(stream)
        c.confirm_select()
        t0 = time.perf_counter()
        for i in range(n):
            c.publish("", stream, props, body)
            if i % batch == batch - 1:
                c.flush_confirmed()
        c.flush_confirmed()
        return n / (time.perf_counter() - t0)


def replay(url: str, stream: str, n: int) -> float:
    with Client(url) as c:
        t0 = time.perf_counter()
        count = sum(1 for _ in c.read_range(stream, 0, n))
        assert count == n, count
        return n / (time.perf_counter() - t0)


def spark_session():  # type: ignore[no-untyped-def]
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from roost.pipeline import RoostDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RoostDataSource)
    return spark


def spark_read(spark, url: str, stream: str, n: int) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    df = spark.read.format("roost").option("url", url).option("stream", stream)
    count = df.option("numPartitions", 2).load().select("offset").count()
    assert count == n, count
    return n / (time.perf_counter() - t0)


def spark_write(spark, url: str, src: str, dst: str, n: int) -> float:  # type: ignore[no-untyped-def]
    with Client(url) as c:
        c.declare_stream(dst)
    df = (
        spark.read.format("roost").option("url", url).option("stream", src)
        .option("numPartitions", 2).load().select("body").cache()
    )
    assert df.count() == n
    t0 = time.perf_counter()
    df.write.format("roost").option("url", url).option("stream", dst).mode("append").save()
    rate = n / (time.perf_counter() - t0)
    df.unpersist()
    with Client(url) as c:
        written = c.stream_info(dst)["x-stream-next-offset"]
    assert written == n, written
    return rate


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--no-spark", action="store_true")
    p.add_argument("--warmup", type=int, default=None,
                   help="messages in the unmeasured Spark pass (default: --messages; 0: none)")
    args = p.parse_args()
    if args.warmup is None:
        args.warmup = args.messages
    results: dict[str, list[float]] = {}
    spark = None if args.no_spark else spark_session()
    if spark is not None and args.warmup:
        # an unmeasured pass: first use starts the Python workers, and the JVM's JIT has
        # compiled the read and write paths by its end (a long-running job's steady state)
        with roost() as url:
            publish(url, "warm", args.warmup, args.size)
            spark_read(spark, url, "warm", args.warmup)
            spark_write(spark, url, "warm", "warm-out", args.warmup)
    for run in range(args.runs):
        with roost() as url:
            n = args.messages
            results.setdefault("publish msg/s (1 KiB, confirms)", []).append(
                publish(url, "bench", n, args.size))
            results.setdefault("replay msg/s (consume from first)", []).append(
                replay(url, "bench", n))
            if spark is not None:
                results.setdefault("spark read rows/s (local[2])", []).append(
                    spark_read(spark, url, "bench", n))
                results.setdefault("spark write rows/s (local[2])", []).append(
                    spark_write(spark, url, "bench", f"out{run}", n))
    if spark is not None:
        spark.stop()
    print(f"{'measure':40} {'median':>12}  runs")
    for name, values in results.items():
        runs = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{name:40} {statistics.median(values):>12,.0f}  {runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
