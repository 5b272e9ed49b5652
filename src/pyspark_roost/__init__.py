"""PySpark's auto-registration convention: ``format("roost")`` finds ``DefaultSource``
here without a ``spark.dataSource.register`` call when this package is installed."""

from roost.pipeline.source import RoostDataSource as DefaultSource

__all__ = ["DefaultSource"]
