"""RabbitMQ's names for AMQP field types, as its error texts show them."""

from __future__ import annotations

import datetime
import decimal
from typing import Any


def field_type(value: Any) -> str:
    """The field type a decoded argument or header value came from ('signedint', …)."""
    if value is None:
        return "void"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "signedint" if -(2**31) <= value < 2**31 else "long"
    for kind, name in (
        (float, "double"),
        (decimal.Decimal, "decimal"),
        (datetime.datetime, "timestamp"),
        (dict, "table"),
        (list, "array"),
        (bytes, "binary"),
    ):
        if isinstance(value, kind):
            return name
    return "longstr"
