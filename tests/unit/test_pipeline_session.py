"""When the ready-made jobs pick the Spark master themselves, and when they must not."""

from __future__ import annotations

import pytest
from pyspark import SparkContext

from roost.pipeline.session import launched_with_master


@pytest.mark.parametrize(
    ("env", "configured"),
    [
        ({}, False),  # python job.py: the job defaults to local[*]
        ({"PYSPARK_GATEWAY_PORT": "40123"}, True),  # spark-submit / pyspark shell
        ({"PYSPARK_SUBMIT_ARGS": "--master spark://h:7077 pyspark-shell"}, True),
        ({"PYSPARK_SUBMIT_ARGS": "--conf spark.master=local[3] pyspark-shell"}, True),
        ({"PYSPARK_SUBMIT_ARGS": "--driver-memory 2g pyspark-shell"}, False),
    ],
)
def test_master_is_left_to_the_launcher(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], configured: bool
) -> None:
    # the suite's own SparkSession may be running (tests/spark): this is about env alone
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_SUBMIT_ARGS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert launched_with_master() is configured

