"""SparkSession for the ready-made jobs: ``local[*]`` unless a master is given, loopback
addresses when local, and the ``roost`` format registered."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_session(app: str, master: str | None = None, shuffle_partitions: int = 4) -> Any:
    # executors' Python must be the one with roost installed (spark.pyspark.python alone
    # was seen picking another interpreter): set PYSPARK_PYTHON unless the user did
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from roost.pipeline.source import RoostDataSource

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    elif "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        builder = builder.master("local[*]")
    if not master or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    spark = (
        builder.config("spark.ui.enabled", "false")
        # the jobs print their own progress lines; Spark's bar would overwrite them
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.extraJavaOptions", JVM_FLAGS)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(RoostDataSource)
    return spark


def run_queries(queries: list[Any], *, label: str, quiet: bool = False) -> None:
    """Wait for every query, printing progress (rows in per batch) as it goes."""
    seen: dict[str, int] = {}
    while any(q.isActive for q in queries):
        for q in queries:
            progress = q.lastProgress
            if progress and not quiet and seen.get(q.name or q.id.hex) != progress["batchId"]:
                seen[q.name or q.id.hex] = progress["batchId"]
                print(
                    f"[{label}] {q.name}: batch {progress['batchId']}, "
                    f"{progress['numInputRows']} rows in",
                    file=sys.stderr,
                )
        time.sleep(0.5)
    for q in queries:
        if q.exception() is not None:
            raise RuntimeError(f"query {q.name} failed: {q.exception()}")
