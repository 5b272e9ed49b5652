"""Prometheus text exposition format 0.0.4: ``# HELP``, ``# TYPE``, then one sample a
line. Each metric family is written once, with all its samples together, as the format
requires (``promtool check metrics`` checks it in tests/http/test_prometheus.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Labels = dict[str, str]
Samples = Iterable[tuple[Labels, float]]


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labels_text(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in labels.items()) + "}"


def number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return repr(float(value))


class Exposition:
    def __init__(self, prefix: str = "rabbitmq_") -> None:
        self.lines: list[str] = []
        # rabbitmq_ on /metrics, rabbitmq_detailed_ on /metrics/detailed
        self.prefix = prefix

    def name(self, name: str) -> str:
        if not name.startswith("rabbitmq_"):
            return name  # roost_* series keep their name
        return self.prefix + name.removeprefix("rabbitmq_")

    def metric(self, name: str, kind: str, help_text: str, samples: Samples) -> None:
        full = self.name(name)
        self.lines.append(f"# HELP {full} {help_text}")
        self.lines.append(f"# TYPE {full} {kind}")
        for labels, value in samples:
            self.lines.append(f"{full}{labels_text(labels)} {number(value)}")

    def one(self, name: str, kind: str, help_text: str, value: float) -> None:
        self.metric(name, kind, help_text, [({}, value)])

    def histogram(
        self,
        name: str,
        help_text: str,
        series: Iterable[tuple[Labels, Sequence[str], Sequence[int], float]],
    ) -> None:
        """``series``: (labels, the ``le`` of each bound, counts per bucket with one
        more for what is above the last bound, sum). Buckets are written cumulative."""
        full = self.name(name)
        self.lines.append(f"# HELP {full} {help_text}")
        self.lines.append(f"# TYPE {full} histogram")
        for labels, bounds, counts, total in series:
            running = 0
            for le, count in zip((*bounds, "+Inf"), counts, strict=True):
                running += count
                self.lines.append(f"{full}_bucket{labels_text({**labels, 'le': le})} {running}")
            self.lines.append(f"{full}_sum{labels_text(labels)} {number(total)}")
            self.lines.append(f"{full}_count{labels_text(labels)} {running}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
