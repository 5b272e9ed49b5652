"""``format("roost")`` with no ``register`` call, in a fresh process: PySpark finds the
installed ``pyspark_roost`` module's ``DefaultSource`` by itself."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from roost.pipeline.generate import generate
from tests.support import RoostProcess

JOB = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    flags = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", flags)
        .getOrCreate()
    )
    df = spark.read.format("roost").option("url", sys.argv[1]).option("stream", sys.argv[2])
    print("rows:", df.load().count())
    print("roost imported by the driver:", "roost.pipeline.source" in sys.modules)
    spark.stop()
    """
)


@pytest.mark.timeout(240)
def test_format_roost_works_without_register(broker: RoostProcess) -> None:
    generate(broker.url, "autoreg", 37, invalid_every=0)
    done = subprocess.run(
        [sys.executable, "-c", JOB, broker.url, "autoreg"],
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows: 37" in done.stdout
    # nothing in the job imported or registered the source: Spark's lookup found it
    assert "roost imported by the driver: False" in done.stdout
    assert "replaced a statically registered" not in done.stderr
