"""The PySpark side of Roost: the ``roost`` data source and ready-made jobs.

A client of the broker (AMQP only); it never imports the broker's core or store.
"""

from roost.pipeline.source import RoostDataSource

__all__ = ["RoostDataSource"]
