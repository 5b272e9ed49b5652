"""Latency histograms and the aggregation of per-process results (pure, no I/O)."""

from __future__ import annotations

import math
import time
from collections.abc import MutableSequence
from dataclasses import dataclass, field
from typing import Any

TIMESTAMP_BYTES = 8  # a body shorter than this carries no timestamp: no latency figures

# Values keep this many significant bits: a bucket is at most 1/128 (< 0.8 %) below
# the value it stands for, and a run needs a few hundred buckets, not one per message.
SIGNIFICANT_BITS = 7
_EXACT_BELOW = 1 << SIGNIFICANT_BITS


def bucket(value: int) -> int:
    """The histogram key of ``value``: itself rounded down to SIGNIFICANT_BITS bits."""
    if value < _EXACT_BELOW:
        return max(value, 0)
    shift = value.bit_length() - SIGNIFICANT_BITS
    return value >> shift << shift


class Histogram:
    """Counts per bucket plus the exact maximum; cheap to pickle and to merge."""

    __slots__ = ("counts", "max")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.max = 0

    def record(self, value: int) -> None:
        key = bucket(value)
        self.counts[key] = self.counts.get(key, 0) + 1
        if value > self.max:
            self.max = value

    def merge(self, other: Histogram) -> None:
        for key, n in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + n
        self.max = max(self.max, other.max)

    def since(self, earlier: dict[int, int]) -> Histogram:
        """What was recorded after ``earlier`` (a copy of ``counts`` taken then); its max
        is the highest bucket (the exact one is not kept per interval)."""
        out = Histogram()
        for key, n in self.counts.items():
            n -= earlier.get(key, 0)
            if n > 0:
                out.counts[key] = n
        out.max = max(out.counts, default=0)
        return out

    @property
    def min(self) -> int:
        """The lowest value's bucket (exact below 128)."""
        return min(self.counts, default=0)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def percentile(self, p: float) -> int:
        """Nearest-rank percentile (0 < p <= 100) of the recorded values, bucket-rounded."""
        total = self.total
        if total == 0:
            raise ValueError("empty histogram")
        rank = max(1, math.ceil(p / 100 * total))
        seen = 0
        for key in sorted(self.counts):
            seen += self.counts[key]
            if seen >= rank:
                return min(key, self.max)
        return self.max  # unreachable: seen ends at total >= rank

    def summary(self) -> dict[str, int] | None:
        if not self.counts:
            return None
        return {
            "min": self.min,
            "p50": self.percentile(50),
            "p75": self.percentile(75),
            "p95": self.percentile(95),
            "p99": self.percentile(99),
            "max": self.max,
        }

    def perftest(self) -> tuple[int, int, int, int, int]:
        """PerfTest's figures: min, median, 75th, 95th and 99th percentiles (0s if empty)."""
        if not self.counts:
            return (0, 0, 0, 0, 0)
        return (self.min, self.percentile(50), self.percentile(75), self.percentile(95),
                self.percentile(99))


class Tally:
    """One consumer's running counts, shared by every protocol's hot path. ``deadline``
    is read from ``control[0]``, which the parent moves when a count-bound run ends."""

    __slots__ = ("busy_us", "cancelled", "consumed", "control", "full", "in_window",
                 "last_rx_ns", "latency", "limit", "paid", "progress", "slot", "stale",
                 "start_ns")

    def __init__(self) -> None:
        self.consumed = 0  # deliveries, stale ones included (they need acks all the same)
        self.stale = 0  # stamped before this run started: left over from an earlier run
        self.latency = Histogram()
        self.start_ns = 0
        self.limit = 1 << 62  # -D: stop after this many
        self.full = False  # the limit is reached, or the run is over: count no more
        self.cancelled = False
        self.in_window: int | None = None  # counted before the deadline passed
        self.last_rx_ns = 0
        self.control: MutableSequence[int] = [1 << 62]
        self.progress: MutableSequence[int] = [0]
        self.slot = 0
        self.busy_us = 0  # -L: time spent on each message before it is acked
        self.paid = 0  # messages whose -L time was spent

    @property
    def counted_total(self) -> int:
        return self.consumed - self.stale

    @property
    def done(self) -> bool:
        return self.full or self.cancelled

    def arrived(self, now: int) -> None:
        """A read is about to be counted at ``now`` (ns)."""
        if self.in_window is None and now >= self.control[0]:
            self.in_window = self.consumed - self.stale
        self.last_rx_ns = now

    def counted(self) -> None:
        """A read's messages are counted (each protocol calls this before it acks them)."""
        done = self.consumed - self.stale
        if self.busy_us and done > self.paid:
            # PerfTest's consumer latency: the consumer (a process of its own) is busy
            # for that long per message; one sleep for the read's messages together
            time.sleep((done - self.paid) * self.busy_us / 1e6)
        self.paid = done
        self.progress[self.slot] = done

    def take(self, body: bytes | bytearray, now: int) -> bool:
        """Count one delivery taken at ``now`` (ns), its latency from the timestamp its
        body starts with; False when it is not counted (-D reached, or the run is over)."""
        if self.full or self.consumed - self.stale >= self.limit:
            self.full = True
            return False
        if len(body) >= TIMESTAMP_BYTES:
            self.record(int.from_bytes(body[:TIMESTAMP_BYTES], "big"), now)
        else:
            self.consumed += 1
        return True

    def record(self, stamp: int, now: int) -> None:
        """One message stamped ``stamp`` (ns) taken at ``now``: the slow path's count."""
        self.consumed += 1
        if stamp < self.start_ns:
            self.stale += 1
            return
        self.latency.record(max(0, (now - stamp) // 1000))


@dataclass
class ProducerResult:
    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    returned: int = 0  # -f mandatory: publishes the broker could not route
    finished_ns: int = 0  # when it stopped publishing (monotonic)
    error: str | None = None


@dataclass
class ConsumerResult:
    consumed: int = 0  # everything received, the drain after the window included
    consumed_in_window: int = 0  # received before the producers' deadline
    stale: int = 0  # skipped: stamped before the run began (an earlier run's leftovers)
    latency_us: Histogram = field(default_factory=Histogram)
    last_ns: int = 0  # when its last delivery arrived (monotonic)
    error: str | None = None


def rate_budget(rate: float, elapsed_s: float, sent: int) -> int:
    """How many messages a producer limited to ``rate`` msg/s may send now."""
    return max(0, int(rate * elapsed_s) + 1 - sent)


def aggregate(
    *,
    producers: list[ProducerResult],
    consumers: list[ConsumerResult],
    size: int,
    duration_s: float | None,
    start_ns: int = 0,
    server: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """The one JSON object a run reports. Rates are per second over the measured window
    (``duration_s``); a count-bound run (None) measures each side from ``start_ns`` to
    its last publish or delivery."""
    latency = Histogram()
    for c in consumers:
        latency.merge(c.latency_us)
    published = sum(p.published for p in producers)
    consumed = sum(c.consumed for c in consumers)
    if duration_s is None:
        publish_s = (max((p.finished_ns for p in producers), default=start_ns) - start_ns) / 1e9
        consume_s = (max((c.last_ns for c in consumers), default=start_ns) - start_ns) / 1e9
        in_window, window_s = consumed, max(publish_s, consume_s)
    else:
        in_window = sum(c.consumed_in_window for c in consumers)
        publish_s = consume_s = window_s = duration_s
    results: list[ProducerResult | ConsumerResult] = [*producers, *consumers]
    return {
        "mode": "throughput",
        **extra,
        "server": server,
        "producers": len(producers),
        "consumers": len(consumers),
        "size": size,
        "duration_s": round(window_s, 3),
        "published": published,
        "confirmed": sum(p.confirmed for p in producers),
        "nacked": sum(p.nacked for p in producers),
        "returned": sum(p.returned for p in producers),
        "consumed": consumed,
        "stale": sum(c.stale for c in consumers),
        "publish_rate": _rate(published, publish_s),
        "consume_rate": _rate(in_window, consume_s),
        "latency_us": latency.summary(),
        "errors": [r.error for r in results if r.error],
    }


def declare_report(*, declares: int, elapsed_s: float, server: str = "") -> dict[str, Any]:
    return {
        "mode": "queue-declares",
        "server": server,
        "declares": declares,
        "duration_s": round(elapsed_s, 3),
        "declare_rate": _rate(declares, elapsed_s),
    }


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else 0.0
