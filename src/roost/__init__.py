"""Roost: a RabbitMQ-compatible message broker written in Python."""

from roost import _build

__version__ = "0.1.0"

# before any compiled module is imported: the pure sources under ROOST_PURE_PYTHON=1 or
# where an extension is older than its source (docs/compiled.md)
_build.choose()
