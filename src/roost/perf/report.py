"""PerfTest's text output: one line per interval while a run goes, summary lines at the
end (pure formatting).

    id: test-104559-972, time: 1.000s, sent: 25353 msg/s, received: 21470 msg/s,
    min/median/75th/95th/99th consumer latency: 1125/53420/81622/105021/109837 µs

(one line on screen). Rates are formatted as PerfTest does: 0, two decimals below 1,
one below 10, whole numbers above.
"""

from __future__ import annotations

from typing import Any

LATENCY_HEADER = "min/median/75th/95th/99th"


def rate(value: float) -> str:
    if value == 0:
        return "0"
    if value < 1:
        return f"{value:.2f}"
    if value < 10:
        return f"{value:.1f}"
    return str(int(value))


def progress_line(
    test_id: str, elapsed_s: float, *, sent: float | None, received: float | None,
    confirmed: float | None = None, nacked: float | None = None,
    latency: tuple[int, ...] | None = None,
) -> str:
    """One interval: rates in msg/s (None: that side is not part of the run)."""
    parts = [f"id: {test_id}", f"time: {elapsed_s:.3f}s"]
    if sent is not None:
        parts.append(f"sent: {rate(sent)} msg/s")
        if confirmed is not None and nacked is not None:
            parts.append(f"confirmed: {rate(confirmed)} msg/s")
            parts.append(f"nacked: {rate(nacked)} msg/s")
    if received is not None:
        parts.append(f"received: {rate(received)} msg/s")
        figures = "/".join(str(v) for v in (latency or (0, 0, 0, 0, 0)))
        parts.append(f"{LATENCY_HEADER} consumer latency: {figures} µs")
    return ", ".join(parts)


def summary_lines(test_id: str, report: dict[str, Any]) -> list[str]:
    head = f"id: {test_id}, "
    lines = [head + f"sending rate avg: {rate(report['publish_rate'])} msg/s",
             head + f"receiving rate avg: {rate(report['consume_rate'])} msg/s"]
    lat = report.get("latency_us")
    if report.get("consumers") and lat:
        figures = "/".join(str(lat[k]) for k in ("min", "p50", "p75", "p95", "p99"))
        lines.append(head + f"consumer latency {LATENCY_HEADER} {figures} µs")
    return lines
