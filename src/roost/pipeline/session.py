"""SparkSession for the ready-made jobs: ``local[*]`` unless a master is given or
configured, loopback addresses when local, and the ``roost`` format registered."""

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
    local = False
    if master:
        builder = builder.master(master)
        local = master.startswith("local")
    elif not launched_with_master():
        builder = builder.master("local[*]")
        local = True
    if local:
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


def launched_with_master() -> bool:
    """Whether something other than this code picks the master: ``spark-submit`` (and the
    ``pyspark`` shell) start Python with PYSPARK_GATEWAY_PORT set, and their --master, or
    spark-defaults.conf, or their own local[*] default must win; a master set in code
    would override it and silently run a cluster job locally. PYSPARK_SUBMIT_ARGS can
    name one too when Python starts the JVM itself, and a running SparkContext already
    has one."""
    from pyspark import SparkContext

    if os.environ.get("PYSPARK_GATEWAY_PORT") or SparkContext._active_spark_context:
        return True
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    return "--master" in submit_args or "spark.master" in submit_args


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
