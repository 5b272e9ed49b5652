"""PerfTest's variable values (``--variable-rate RATE:DURATION``, ``--variable-size
SIZE:DURATION``, each repeatable): a value held for its duration, then the next, and
after the last one the first again, for as long as the run lasts (pure, no I/O)."""

from __future__ import annotations

import math
from dataclasses import dataclass


def parse_step(text: str, flag: str) -> tuple[float, float]:
    """``1000:30`` -> (1000.0, 30.0): a value >= 0 held for a duration > 0 seconds."""
    value, sep, duration = text.partition(":")
    try:
        step = (float(value), float(duration))
    except ValueError:
        step = (-1.0, 0.0)
    if not sep or step[0] < 0 or step[1] <= 0 or not all(map(math.isfinite, step)):
        raise ValueError(f"{flag} wants VALUE:SECONDS (value >= 0, seconds > 0), not {text!r}")
    return step


@dataclass(frozen=True)
class Steps:
    """Values that change over time, cycling; ``steps`` is ((value, seconds), …)."""

    steps: tuple[tuple[float, float], ...]

    @property
    def period(self) -> float:
        return sum(seconds for _value, seconds in self.steps)

    def _locate(self, t: float) -> tuple[int, float, float]:
        """(step index, time into it, total of value x time before it within the cycle)."""
        t = max(0.0, t) % self.period
        before = 0.0
        for i, (value, seconds) in enumerate(self.steps):
            if t < seconds:
                return i, t, before
            t -= seconds
            before += value * seconds
        last_value, last_seconds = self.steps[-1]  # rounding left t at the cycle's end
        return len(self.steps) - 1, last_seconds, before - last_value * last_seconds

    def value_at(self, t: float) -> float:
        return self.steps[self._locate(t)[0]][0]

    def total_until(self, t: float) -> float:
        """The integral of the value from 0 to ``t``: for a rate, the messages due by then."""
        t = max(0.0, t)
        per_cycle = sum(value * seconds for value, seconds in self.steps)
        i, into, before = self._locate(t)
        return t // self.period * per_cycle + before + self.steps[i][0] * into

    def budget(self, t: float, sent: int) -> int:
        """How many messages a producer on this rate schedule may send at ``t`` seconds
        (one ahead while the rate is above zero, as the fixed ``-r`` allows)."""
        ahead = 1 if self.value_at(t) > 0 else 0
        return max(0, int(self.total_until(t)) + ahead - sent)

    def wait_s(self, t: float, sent: int) -> float:
        """Seconds until the budget may be positive again: within the current step when
        its rate gets there, else the step's end."""
        i, into, _before = self._locate(t)
        rate, seconds = self.steps[i]
        to_end = seconds - into
        if rate > 0:
            due = (sent - self.total_until(t)) / rate  # when int(total) + 1 > sent
            return max(0.0, min(due, to_end))
        return to_end
