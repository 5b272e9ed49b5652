"""The PySpark side of Roost: the ``roost`` data source and ready-made jobs.

A client of the broker (AMQP only); it never imports the broker's core or store.
``RoostDataSource`` is imported lazily so ``roost --help`` does not load PySpark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RoostDataSource"]


def __getattr__(name: str) -> Any:
    if name == "RoostDataSource":
        from roost.pipeline.source import RoostDataSource

        return RoostDataSource
    raise AttributeError(name)
