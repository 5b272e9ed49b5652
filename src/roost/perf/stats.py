"""Latency histograms and the aggregation of per-process results (pure, no I/O)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

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
            "p50": self.percentile(50),
            "p95": self.percentile(95),
            "p99": self.percentile(99),
            "max": self.max,
        }


@dataclass
class ProducerResult:
    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    error: str | None = None


@dataclass
class ConsumerResult:
    consumed: int = 0  # everything received, the drain after the window included
    consumed_in_window: int = 0  # received before the producers' deadline
    stale: int = 0  # skipped: stamped before the run began (an earlier run's leftovers)
    latency_us: Histogram = field(default_factory=Histogram)
    error: str | None = None


def rate_budget(rate: float, elapsed_s: float, sent: int) -> int:
    """How many messages a producer limited to ``rate`` msg/s may send now."""
    return max(0, int(rate * elapsed_s) + 1 - sent)


def aggregate(
    *,
    producers: list[ProducerResult],
    consumers: list[ConsumerResult],
    size: int,
    duration_s: float,
    server: str = "",
) -> dict[str, Any]:
    """The one JSON object a run reports; rates are per second over the measured window."""
    latency = Histogram()
    for c in consumers:
        latency.merge(c.latency_us)
    published = sum(p.published for p in producers)
    in_window = sum(c.consumed_in_window for c in consumers)
    results: list[ProducerResult | ConsumerResult] = [*producers, *consumers]
    errors = [r.error for r in results if r.error]
    return {
        "mode": "throughput",
        "server": server,
        "producers": len(producers),
        "consumers": len(consumers),
        "size": size,
        "duration_s": round(duration_s, 3),
        "published": published,
        "confirmed": sum(p.confirmed for p in producers),
        "nacked": sum(p.nacked for p in producers),
        "consumed": sum(c.consumed for c in consumers),
        "stale": sum(c.stale for c in consumers),
        "publish_rate": _rate(published, duration_s),
        "consume_rate": _rate(in_window, duration_s),
        "latency_us": latency.summary(),
        "errors": errors,
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
