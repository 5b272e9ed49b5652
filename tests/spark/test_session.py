"""A job started inside a running Spark application keeps that application's master."""

from __future__ import annotations

from typing import Any

from roost.pipeline.session import launched_with_master


def test_a_running_context_already_has_its_master(spark: Any) -> None:
    assert spark.sparkContext.master.startswith("local")
    assert launched_with_master() is True
