"""Human output: aligned tables and a progress bar; ``--json`` bypasses both."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)  # tags
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":")) if value else ""
    return str(value)


def lookup(item: dict[str, Any], path: str) -> Any:
    value: Any = item
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def table(rows: list[dict[str, Any]], columns: list[str], out: TextIO = sys.stdout) -> None:
    grid = [[c.split(".")[-1] for c in columns]] + [
        [cell(lookup(row, c)) for c in columns] for row in rows
    ]
    widths = [max(len(r[i]) for r in grid) for i in range(len(columns))]
    for n, r in enumerate(grid):
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n")
        if n == 0:
            out.write("  ".join("-" * w for w in widths) + "\n")
    if not rows:
        out.write("(none)\n")


def tsv(
    rows: list[dict[str, Any]], columns: list[str], *, headers: bool, out: TextIO = sys.stdout
) -> None:
    """rabbitmqctl's table: a header, then one tab-separated line per row."""
    if headers:
        out.write("\t".join(columns) + "\n")
    for row in rows:
        out.write("\t".join(cell(row[c] if c in row else lookup(row, c)) for c in columns) + "\n")


def dump(value: Any, out: TextIO = sys.stdout) -> None:
    out.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


class Progress:
    """``[#####-----] 120/400 objects`` redrawn in place on a terminal; on a pipe, one
    line per quarter so logs stay short."""

    def __init__(self, total: int, label: str = "objects", out: TextIO = sys.stderr) -> None:
        self.total, self.label, self.out = max(total, 1), label, out
        self.done = 0
        self.tty = out.isatty()
        self._last_quarter = -1

    def advance(self, n: int) -> None:
        self.done = min(self.total, self.done + n)
        width = 30
        filled = int(width * self.done / self.total)
        line = f"[{'#' * filled}{'-' * (width - filled)}] {self.done}/{self.total} {self.label}"
        if self.tty:
            self.out.write("\r" + line)
            self.out.flush()
        else:
            quarter = 4 * self.done // self.total
            if quarter != self._last_quarter:
                self._last_quarter = quarter
                self.out.write(line + "\n")

    def finish(self) -> None:
        if self.tty:
            self.out.write("\n")
