"""Live message latency: publish to deliver, and publish to confirm, as histograms
(``roost_message_publish_to_deliver_seconds``, ``..._to_confirm_seconds`` in /metrics).

One message in every ``every`` is timed (``--latency-sample``; 1 times every one, 0 none):
its publish stamps ``Message.published_at`` with the monotonic clock, each delivery
(consume or basic.get) of it records the time since, and its publisher confirm, when
asked for, records the time to the confirm (at once for a transient message, after the
group commit's fsync for a persistent one in a durable queue). The others cost one
decrement and one comparison; an untimed delivery, one attribute test. A sample of the
traffic, not every message: what a latency histogram needs, at a cost the broker does
not notice (bench/ops_cost.py measures it).

Messages recovered from disk, or made inside the broker (dead-lettered copies), are not
timed: their publish is not now.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable

# seconds; the last bucket holds what is slower than a minute
BOUNDS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip


class Histogram:
    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BOUNDS) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect_left(BOUNDS, seconds)] += 1
        self.count += 1
        self.total += seconds


class Latency:
    """The two histograms and the sampling countdown."""

    __slots__ = ("confirm", "countdown", "deliver", "every")

    def __init__(self, every: int) -> None:
        self.every = every
        self.countdown = every
        self.deliver = Histogram()
        self.confirm = Histogram()

    def stamp(self) -> float | None:
        """Called for every publish: the time to stamp on this message, or None (not
        sampled)."""
        self.countdown -= 1
        if self.countdown:
            return None
        self.countdown = self.every
        return time.monotonic()

    def delivered(self, published_at: float) -> None:
        self.deliver.observe(time.monotonic() - published_at)

    def timed_confirm(
        self, published_at: float, confirm: Callable[[bool], None]
    ) -> Callable[[bool], None]:
        """``confirm`` that records the time from the publish when it says yes."""

        def confirmed(ok: bool) -> None:
            if ok:
                self.confirm.observe(time.monotonic() - published_at)
            confirm(ok)

        return confirmed
