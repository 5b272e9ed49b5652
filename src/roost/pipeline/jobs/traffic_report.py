"""The traffic report: one HTML page, a summary table at the top, PNG charts below.

Charts are drawn with matplotlib's Agg backend (no display needed) into ``charts/``
next to ``report.html``; the page links them by relative path, so the directory can be
copied or served as it is.
"""

from __future__ import annotations

import datetime
import html
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes
from matplotlib.figure import Figure

NONE = "n/a"  # a figure that has no value (no events of that kind in range)
SERIES_COLOURS = ("#2b6cb0", "#d69e2e", "#38a169", "#c53030", "#805ad5", "#319795", "#dd6b20")
TOP_QUEUES = 6  # lines in the per-queue chart
TOP_KEYS_CHART = 5  # routing keys in the keys-over-time chart


def _figure(title: str, ylabel: str, xlabel: str = "time (UTC)") -> tuple[Figure, Axes]:
    fig = Figure(figsize=(9, 3.6), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title, loc="left", fontsize=12, fontweight="bold")
    ax.set_ylabel(ylabel)
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig, ax


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _times(rows: Iterable[dict[str, Any]]) -> list[datetime.datetime]:
    return sorted({r["window_start"] for r in rows})


def _line(ax: Axes, xs: Sequence[Any], ys: Sequence[float], label: str, colour: str) -> None:
    ax.plot(xs, ys, label=label, color=colour, marker="o" if len(xs) < 30 else None,
            linewidth=1.8, markersize=4)


def rates_chart(rates: list[dict[str, Any]], path: Path) -> Path:
    fig, ax = _figure("Message rates, all queues", "messages per second")
    times = _times(rates)
    totals: dict[str, dict[Any, float]] = defaultdict(lambda: defaultdict(float))
    for r in rates:
        for name in ("publish_rate", "deliver_rate", "ack_rate"):
            totals[name][r["window_start"]] += r[name]
    for (name, label), colour in zip(
        (("publish_rate", "published"), ("deliver_rate", "delivered"), ("ack_rate", "acked")),
        SERIES_COLOURS,
        strict=False,
    ):
        _line(ax, times, [totals[name][t] for t in times], label, colour)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", frameon=False)
    return _save(fig, path)


def queues_chart(rates: list[dict[str, Any]], path: Path) -> Path:
    busiest = _busiest_queues(rates)[:TOP_QUEUES]
    fig, ax = _figure(f"Publish rate of the {len(busiest)} busiest queues", "messages per second")
    times = _times(rates)
    by_queue: dict[str, dict[Any, float]] = defaultdict(dict)
    for r in rates:
        by_queue[r["queue"]][r["window_start"]] = r["publish_rate"]
    for queue, colour in zip(busiest, SERIES_COLOURS, strict=False):
        _line(ax, times, [by_queue[queue].get(t, 0.0) for t in times], queue, colour)
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", frameon=False, fontsize=9)
    return _save(fig, path)


def latency_chart(latency_all: list[dict[str, Any]], path: Path) -> Path:
    fig, ax = _figure("End-to-end latency (published to acknowledged)", "milliseconds")
    rows = sorted(latency_all, key=lambda r: r["window_start"])
    times = [r["window_start"] for r in rows]
    for (key, label), colour in zip(
        (("e2e_p50_ms", "p50"), ("e2e_p95_ms", "p95"), ("e2e_p99_ms", "p99")),
        SERIES_COLOURS,
        strict=False,
    ):
        _line(ax, times, [r[key] for r in rows], label, colour)
    values = [r["e2e_p99_ms"] for r in rows if r["e2e_p99_ms"]]
    low = [r["e2e_p50_ms"] for r in rows if r["e2e_p50_ms"]]
    if values and low and max(values) / max(min(low), 1e-3) > 20:
        ax.set_yscale("log")  # p99 far above p50: a linear axis would flatten p50
    else:
        ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", frameon=False)
    return _save(fig, path)


def keys_chart(top: list[dict[str, Any]], path: Path) -> Path:
    fig, ax = _figure("Top routing keys", "", xlabel="messages published")
    labels = [_key_label(r) for r in top][::-1]
    counts = [r["messages"] for r in top][::-1]
    ax.barh(labels, counts, color=SERIES_COLOURS[0])
    for y, count in enumerate(counts):
        ax.annotate(f"{count:,}", (count, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")
    fig.set_figheight(max(2.0, 0.45 * len(labels) + 1.2))
    return _save(fig, path)


def keys_over_time_chart(top_keys: list[dict[str, Any]], window_s: float, path: Path) -> Path:
    totals: dict[str, int] = defaultdict(int)
    for r in top_keys:
        totals[_key_label(r)] += r["messages"]
    keys = sorted(totals, key=lambda k: (-totals[k], k))[:TOP_KEYS_CHART]
    fig, ax = _figure(f"Publish rate of the top {len(keys)} routing keys", "messages per second")
    times = _times(top_keys)
    per: dict[str, dict[Any, float]] = defaultdict(dict)
    for r in top_keys:
        per[_key_label(r)][r["window_start"]] = r["messages"] / window_s
    series = [[per[k].get(t, 0.0) for t in times] for k in keys]
    if times and series:
        colours = SERIES_COLOURS[: len(keys)]
        # (datetimes are fine here; matplotlib's stubs only name arrays)
        ax.stackplot(cast(Any, times), series, labels=keys, colors=colours, alpha=0.85)
        # beside the plot: inside, it would hide the stack's top
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=9)
    ax.set_ylim(bottom=0)
    return _save(fig, path)


def _key_label(row: dict[str, Any]) -> str:
    exchange = row["exchange"] or "(default)"
    return f"{row['routing_key'] or '(empty)'} @ {exchange}"


def _busiest_queues(rates: list[dict[str, Any]]) -> list[str]:
    totals: dict[str, int] = defaultdict(int)
    for r in rates:
        totals[r["queue"]] += r["published"] + r["delivered"]
    return sorted(totals, key=lambda q: (-totals[q], q))


# -- the page ---------------------------------------------------------------------------------

CSS = """
body{font:15px/1.45 system-ui,sans-serif;color:#1a202c;max-width:980px;margin:2em auto;
padding:0 1em}
h1{margin-bottom:.1em} .sub{color:#4a5568;margin-top:0}
table{border-collapse:collapse;margin:.6em 0 1.6em} td,th{padding:.3em .8em;text-align:right}
th{background:#edf2f7} td:first-child,th:first-child{text-align:left}
tr:nth-child(even) td{background:#f7fafc}
.summary td{font-size:16px} .summary td:nth-child(2){font-weight:600}
figure{margin:1.2em 0} img{max-width:100%} figcaption{color:#4a5568;font-size:13px}
.note{color:#4a5568;font-size:13px;border-top:1px solid #e2e8f0;padding-top:.8em}
"""


def _ms(value: Any) -> str:
    return NONE if value is None else f"{value:,.1f} ms"


def _num(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    out = [f"<table class='{cls}'><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head)]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>")
    return "\n".join(out) + "</table>"


def _when(ts_ms: float | None) -> str:
    if ts_ms is None:
        return NONE
    moment = datetime.datetime.fromtimestamp(ts_ms / 1000, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    s = r["summary"]
    by_type = s["by_type"]
    first, last = s["first_message_ts"], s["last_message_ts"]
    span_s = max((last or 0) - (first or 0), 0) / 1000
    published = by_type.get("message.published", 0)
    overall = r["latency_overall"]
    busiest = _busiest_queues(r["rates"])
    top = r["top_keys_overall"]
    rows = [
        ("Message traffic", f"{_when(first)} to {_when(last)} ({span_s:,.0f} s)"),
        ("Messages published", f"{published:,}"
         + (f" ({published / span_s:,.1f} msg/s on average)" if span_s else "")),
        ("Delivered / acknowledged", f"{by_type.get('message.delivered', 0):,} / "
         f"{by_type.get('message.acked', 0):,}"),
        ("Rejected / dead-lettered", f"{by_type.get('message.rejected', 0):,} / "
         f"{by_type.get('message.dead_lettered', 0):,}"),
        ("Unroutable publishes", f"{s['unroutable']:,}"),
        ("Bytes published", f"{s['bytes_published']:,}"),
        ("End-to-end latency p50 / p95 / p99",
         " / ".join(_ms(overall.get(k)) for k in ("e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms"))),
        ("Time queued (delivery latency) p50 / p95 / p99",
         " / ".join(_ms(overall.get(k)) for k in
                    ("delivery_p50_ms", "delivery_p95_ms", "delivery_p99_ms"))),
        ("Connections opened / closed", f"{by_type.get('connection.created', 0):,} / "
         f"{by_type.get('connection.closed', 0):,}"),
        ("Queues created / deleted", f"{by_type.get('queue.created', 0):,} / "
         f"{by_type.get('queue.deleted', 0):,}"),
        ("Busiest queue", busiest[0] if busiest else NONE),
        ("Top routing key", f"{_key_label(top[0])} ({top[0]['messages']:,} messages)"
         if top else NONE),
    ]
    return rows


def render(r: dict[str, Any], out: Path) -> str:
    """Draw the charts under ``out/charts`` and return the page."""
    charts = out / "charts"
    figures: list[tuple[str, str]] = []
    if r["rates"]:
        rates_chart(r["rates"], charts / "rates.png")
        figures.append(("rates.png", "Published, delivered and acknowledged messages per "
                        f"second, summed over every queue, per {r['window']} window."))
        queues_chart(r["rates"], charts / "queues.png")
        figures.append(("queues.png", "Messages published into each of the busiest queues "
                        "per second (a message routed to two queues counts in both)."))
    if r["latency_all"]:
        latency_chart(r["latency_all"], charts / "latency.png")
        figures.append(("latency.png", "Percentiles of the time from publish to "
                        "acknowledgement of the messages acknowledged in each window."))
    if r["top_keys_overall"]:
        keys_chart(r["top_keys_overall"], charts / "keys.png")
        figures.append(("keys.png", "Routing keys with the most publishes over the whole "
                        "range (the exchange after the @)."))
        keys_over_time_chart(r["top_keys"], r["window_seconds"], charts / "keys_over_time.png")
        figures.append(("keys_over_time.png", "How the top keys' publishes were spread "
                        "over time, stacked."))
    r["charts"] = [str(charts / name) for name, _ in figures]

    queue_latency = {q["queue"]: q for q in r["latency_by_queue"]}
    per_queue = []
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in r["rates"]:
        for k in ("published", "delivered", "acked", "rejected", "dead_lettered"):
            totals[row["queue"]][k] += row[k]
    for queue in _busiest_queues(r["rates"]):
        t, lat = totals[queue], queue_latency.get(queue, {})
        per_queue.append((queue, _num(t["published"]), _num(t["delivered"]), _num(t["acked"]),
                          _num(t["rejected"]), _num(t["dead_lettered"]),
                          _ms(lat.get("e2e_p50_ms")), _ms(lat.get("e2e_p95_ms")),
                          _ms(lat.get("e2e_p99_ms"))))
    keys = [(i + 1, _key_label(k), _num(k["messages"]), _num(k["bytes"]))
            for i, k in enumerate(r["top_keys_overall"])]
    parts = [
        "<!doctype html><html lang='en'><meta charset='utf-8'>",
        "<title>Roost traffic report</title>",
        f"<style>{CSS}</style><body>",
        "<h1>Roost traffic report</h1>",
        f"<p class='sub'>Events stream <b>{html.escape(r['stream'])}</b> at "
        f"{html.escape(r['where'])}: {r['summary']['events']:,} events from "
        f"{_when(r['summary']['first_ts'])} to {_when(r['summary']['last_ts'])}, in "
        f"{html.escape(r['window'])} windows.</p>",
        _table(("Summary", ""), summary_rows(r), "summary"),
    ]
    for name, caption in figures:
        parts.append(f"<figure><img src='charts/{name}' alt='{html.escape(caption)}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    parts += [
        "<h2>Queues</h2>",
        _table(("queue", "published", "delivered", "acked", "rejected", "dead-lettered",
                "e2e p50", "e2e p95", "e2e p99"), per_queue),
        "<h2>Top routing keys</h2>",
        _table(("#", "routing key @ exchange", "messages", "bytes"), keys),
        "<p class='note'>Rates are messages per second over each window. End-to-end latency "
        "is the time from a message's publish to its first acknowledgement (or its delivery, "
        "for consumers without acks), per queue; delivery latency is the time to its first "
        "delivery. Each message counts in the window of its acknowledgement. Tables of "
        "every window are in the Parquet directories next to this page (rates, latency, "
        "latency_all, top_keys, events).</p>",
        "</body></html>",
    ]
    return "\n".join(parts)
