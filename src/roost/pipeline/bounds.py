"""Where a read starts and ends, as users write it: an offset (earliest, latest or a
number) or a time (milliseconds since the epoch or an ISO-8601 date-time).

No Spark here: the data source's options and the traffic job's ``--since``/``--until``
and ``--starting-offsets`` share these without importing pyspark.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from roost.pipeline.amqp import RoostError

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def resolve_offset(spec: str, info: dict[str, Any]) -> int:
    """An offset option (earliest, latest or a number) against the offset query's answer."""
    value = spec.strip()
    if value == "earliest":
        return int(info["x-stream-first-offset"])
    if value == "latest":
        return int(info["x-stream-next-offset"])
    try:
        return int(value)
    except ValueError:
        raise RoostError(f"bad offset {value!r}: earliest, latest or a number") from None


def time_ms(value: str) -> float:
    """Milliseconds since the epoch, from that number (a fraction allowed) or an ISO-8601
    date-time, UTC unless it names a zone."""
    text = str(value).strip()
    try:
        ms = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(ms):
            return ms
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise RoostError(
            f"bad timestamp {value!r}: milliseconds since the epoch or an ISO-8601 date-time"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    # timedelta division is exact in microseconds, unlike timestamp() * 1000
    return (moment - _EPOCH) / datetime.timedelta(milliseconds=1)
