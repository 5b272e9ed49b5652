"""Prometheus text exposition parsed for the tests: each sample line's name and labels to its
value."""

from __future__ import annotations

import re

# a sample value: a float in any notation Prometheus allows (5.78e-05 included)
LINE = re.compile(r"^([a-z_]+)(\{[^}]*\})? ([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|Inf|NaN))$")


def parse(text: str) -> dict[str, float]:
    """``name{labels}`` -> value; also checks every line is valid exposition format."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = LINE.match(line)
        assert m, f"not Prometheus text: {line!r}"
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def series(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, every sample line."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out
