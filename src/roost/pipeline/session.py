"""SparkSession for the ready-made jobs: ``local[*]`` unless a master is given or
configured, loopback addresses when local, and the ``roost`` format registered. The jobs'
defaults (UI off, no console progress bar, 4 shuffle partitions, faster-starting JVM
flags) give way, under spark-submit, to whatever its --conf or spark-defaults.conf set."""

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
    launched = False
    if master:
        builder = builder.master(master)
        local = master.startswith("local")
    elif launched_with_master():
        launched = True
    else:
        builder = builder.master("local[*]")
        local = True
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    settings = {
        "spark.ui.enabled": "false",
        # the jobs print their own progress lines; Spark's bar would overwrite them
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.driver.extraJavaOptions": JVM_FLAGS,
    }
    if launched:
        # spark-submit's --conf and spark-defaults.conf (or the running application's
        # settings) are the user's: a value set in code would silently override them
        taken = configured_keys()
        settings = {k: v for k, v in settings.items() if k not in taken}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(RoostDataSource)
    return spark


def configured_keys() -> set[str]:
    """The settings already made for the application about to start: those of a running
    SparkContext, else what the JVM that spark-submit started (or PYSPARK_SUBMIT_ARGS
    describes) loads as defaults: its --conf options and spark-defaults.conf."""
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return {key for key, _ in active.getConf().getAll()}
    SparkContext._ensure_initialized()  # joins spark-submit's JVM, or starts one
    return {key for key, _ in SparkConf().getAll()}


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
