"""The offset and time options shared by the data source and the traffic job, and that
the job's command line reads them without loading PySpark."""

from __future__ import annotations

import subprocess
import sys

import pytest

from roost.pipeline.amqp import RoostError
from roost.pipeline.bounds import resolve_offset, time_ms

INFO = {"x-stream-first-offset": 5, "x-stream-next-offset": 42}


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1700000000123", 1700000000123.0),
        ("1700000000123.5", 1700000000123.5),  # the traffic job's --since may be fractional
        (" 2024-01-01T00:00:00.123 ", 1704067200123.0),  # no zone: UTC
        ("2024-01-01T01:00:00.0005+01:00", 1704067200000.5),
        ("2024-01-01", 1704067200000.0),
    ],
)
def test_times_in_ms_or_iso_8601(text: str, ms: float) -> None:
    assert time_ms(text) == ms


@pytest.mark.parametrize("text", ["yesterday", "", "nan", "inf", "2024-13-01"])
def test_a_bad_time_is_a_clear_error(text: str) -> None:
    with pytest.raises(RoostError, match=f"bad timestamp {text!r}: milliseconds since"):
        time_ms(text)


@pytest.mark.parametrize(
    ("spec", "offset"), [("earliest", 5), ("latest", 42), (" 17 ", 17), ("0", 0)]
)
def test_offsets(spec: str, offset: int) -> None:
    assert resolve_offset(spec, INFO) == offset


def test_a_bad_offset_is_a_clear_error() -> None:
    with pytest.raises(RoostError, match="bad offset 'first': earliest, latest or a number"):
        resolve_offset("first", INFO)


def test_the_jobs_command_line_does_not_load_pyspark() -> None:
    code = (
        "import sys, roost.pipeline.cli, roost.pipeline.jobs.traffic, roost.pipeline.bounds;"
        "assert 'pyspark' not in sys.modules, sorted(m for m in sys.modules if 'spark' in m)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
