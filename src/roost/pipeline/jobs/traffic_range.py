"""Which offsets of the events stream hold the events of a time range (``--since``,
``--until``), so that a batch run reads only those instead of filtering everything.

Events are compared by their ``ts``, the stream's messages by their append time. The
broker appends a batch of events shortly after they happen (core/events_stream.py:
within 0.1 s, later when it is busy), so:

- no event at or after ``since`` is in a message appended before ``since``: reading
  starts at the first message appended at or after it;
- events before ``until`` may still be in messages appended after it: reading goes on
  past ``until`` up to the first batch whose first event is at or after ``until``
  (events are buffered and written in the order they happen, so every later batch
  starts later still). That takes a message or two beyond the range, however late the
  broker wrote them.

The job still keeps only the events in the range, so its outputs are those of reading
everything and filtering; this only assumes that the broker's clock does not step back.
"""

from __future__ import annotations

import json
import math
from typing import Any

from roost.pipeline.amqp import Client

LOOKAHEAD = 4  # messages fetched per step while looking for the end of the range


def offsets(
    client: Client,
    stream: str,
    info: dict[str, Any],
    start: int,
    end: int,
    since: float | None,
    until: float | None,
) -> tuple[int, int]:
    """``[start, end)`` narrowed to the messages that hold events from ``since``
    (inclusive) to ``until`` (exclusive), both ms since the epoch; one round trip to
    map the times, and a few messages read after ``until``."""
    times = [math.floor(since) if since is not None else 0, math.ceil(until or 0)]
    by_time = client.offsets_for_times(stream, info, times)
    if since is not None:
        start = max(start, by_time[0])
    if until is not None:
        end = min(end, _end(client, stream, by_time[1], end, until))
    return start, max(start, end)


def _end(client: Client, stream: str, offset: int, limit: int, until: float) -> int:
    """The first offset from ``offset`` whose message is an events batch starting at or
    after ``until`` (``limit`` when there is none before it)."""
    while offset < limit:
        step = min(offset + LOOKAHEAD, limit)
        found: int | None = None
        for d in client.read_range(stream, offset, step, prefetch=LOOKAHEAD):
            headers = d.properties[2] or {}
            ts = _first_ts(headers, d.body)
            if found is None and ts is not None and ts >= until:
                found = int(headers["x-stream-offset"])  # read the step out all the same
        if found is not None:
            return found
        offset = step
    return limit


def _first_ts(headers: dict[str, Any], body: bytes) -> float | None:
    """The first event's time of a batch the broker wrote; None for other messages."""
    if "x-roost-events" not in headers:
        return None
    try:
        events = json.loads(body)
        ts = events[0]["ts"]
    except (ValueError, LookupError, TypeError):
        return None
    return float(ts) if isinstance(ts, int | float) and not isinstance(ts, bool) else None
