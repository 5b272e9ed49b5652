"""PerfTest's variable rates and sizes: steps held for their durations, cycling."""

from __future__ import annotations

import pytest

from roost.perf.schedule import Steps, parse_step


def test_parse_step() -> None:
    assert parse_step("1000:30", "--variable-rate") == (1000.0, 30.0)
    assert parse_step("0:2.5", "--variable-rate") == (0.0, 2.5)
    for bad in ("1000", "1000:0", "-1:5", "a:b", "1:inf"):
        with pytest.raises(ValueError, match="--variable-rate"):
            parse_step(bad, "--variable-rate")


def test_values_are_held_for_their_duration_then_cycle() -> None:
    steps = Steps(((100.0, 1.0), (400.0, 2.0)))
    assert [steps.value_at(t) for t in (0, 0.99, 1.0, 2.9, 3.0, 3.5, 4.2)] == [
        100, 100, 400, 400, 100, 100, 400]


def test_the_rate_budget_is_the_integral_of_the_steps() -> None:
    steps = Steps(((100.0, 1.0), (0.0, 1.0), (400.0, 1.0)))
    assert steps.total_until(1.0) == 100
    assert steps.total_until(2.0) == 100  # nothing is due while the rate is 0
    assert steps.total_until(2.5) == 300
    assert steps.total_until(3.5) == 550  # the second cycle: 500 + 50
    assert steps.budget(0.0, 0) == 1  # the first message goes at once, as with -r
    assert steps.budget(1.5, 100) == 0  # rate 0: nothing, not even one ahead
    assert steps.budget(2.5, 100) == 201
    assert steps.wait_s(1.5, 100) == pytest.approx(0.5)  # until the rate-0 step ends
    assert steps.wait_s(2.5, 301) == pytest.approx(1 / 400)


def test_a_fixed_rate_is_one_step() -> None:
    steps = Steps(((100.0, 1.0),))
    assert [steps.budget(t, 0) for t in (0.0, 0.5, 2.5)] == [1, 51, 251]
