#!/usr/bin/env python3
"""List the metric names RabbitMQ's Grafana dashboards query, for
``docs/metrics/rabbitmq-dashboards.txt`` (tests/http/test_prometheus.py holds Roost's
/metrics to it).

    python tools/dashboard_metrics.py --label 3.10.8 DIR [--label main DIR2 …] > FILE

Each DIR holds the dashboards' JSON as RabbitMQ ships them (rabbitmq-server's
``deps/rabbitmq_prometheus/docker/grafana/dashboards/``, at the tag or commit named by
its ``--label``); they are read, never copied into this repository. A panel's PromQL is
reduced to the series names it selects: strings, label matchers, ranges, grouping
clauses and Grafana variables are dropped, then every name that is not a function or
keyword is a series.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

DASHBOARDS = ("RabbitMQ-Overview", "RabbitMQ-Stream", "RabbitMQ-Quorum-Queues-Raft")
# series prefixes of RabbitMQ's exporter; the rest (datasource names, …) is not a metric
PREFIXES = ("rabbitmq_", "erlang_")
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "offset", "bool", "inf", "nan",
}  # fmt: skip


def queries(dashboard: Any) -> list[str]:
    """Every PromQL text in a dashboard: panel targets and template variable queries."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "query", "definition") and isinstance(value, str):
                    out.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(dashboard)
    return out


def series(promql: str) -> set[str]:
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', promql)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    # label_values(metric, label): the second argument is a label
    text = re.sub(r"label_values\(\s*([\w:]+)\s*,\s*\w+\s*\)", r" \1 ", text)
    found = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", text):
        name, call = m.group(1), m.group(2)
        if not call and name not in PROMQL_WORDS and name.startswith(PREFIXES):
            found.add(name)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--label", action="append", nargs=2, metavar=("LABEL", "DIR"), required=True
    )
    args = parser.parse_args(argv)
    seen: dict[str, list[str]] = {}
    for label, folder in args.label:
        for name in DASHBOARDS:
            dashboard = json.loads((Path(folder) / f"{name}.json").read_text(encoding="utf-8"))
            for metric in set().union(*map(series, queries(dashboard))):
                seen.setdefault(metric, []).append(f"{name.removeprefix('RabbitMQ-')}@{label}")
    for metric in sorted(seen):
        sys.stdout.write(f"{metric}\t{' '.join(seen[metric])}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
