"""A job started inside a running Spark application keeps that application's master
and settings."""

from __future__ import annotations

from typing import Any

from roost.pipeline.session import launched_with_master, spark_session


def test_a_running_context_already_has_its_master(spark: Any) -> None:
    assert spark.sparkContext.master.startswith("local")
    assert launched_with_master() is True


def test_a_running_application_keeps_its_own_settings(spark: Any) -> None:
    """The jobs' defaults apply only to settings nobody made: the suite's session set 2
    shuffle partitions and the UI off; the jobs would say 7 here."""
    same = spark_session("roost-test", shuffle_partitions=7)
    assert same is spark
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
