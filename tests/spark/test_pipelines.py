"""The ready-made pipelines on small data, with their outputs checked."""

from __future__ import annotations

import argparse
import datetime
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from roost.pipeline.amqp import Client
from roost.pipeline.generate import generate
from roost.pipeline.jobs import etl
from roost.pipeline.session import run_queries
from tests.spark.stream_contents import messages
from tests.support import RoostProcess

T0 = 1_700_000_000  # a multiple of 10: windows start on it


def bodies(url: str, stream: str) -> list[tuple[dict[str, Any], bytes]]:
    return [(dict(d.properties[2] or {}), d.body) for d in messages(url, stream)]


def test_etl_validates_windows_and_writes_results(
    spark: Any, broker: RoostProcess, tmp_path: Path
) -> None:
    generate(broker.url, "etl.in", 200, invalid_every=20, start_ts=T0, spacing=0.1)
    # one late valid order pushes the watermark past both 10-second windows
    generate(broker.url, "etl.in", 1, invalid_every=0, start_ts=T0 + 100, seed=2)
    with Client(broker.url) as c:
        c.declare_stream("etl.bad")
        c.declare_stream("etl.totals")
    args = argparse.Namespace(
        url=broker.url,
        input="etl.in",
        dead_letter="etl.bad",
        results="etl.totals",
        exchange="",
        output=str(tmp_path / "totals"),
        window="10 seconds",
        watermark="10 seconds",
        checkpoint=str(tmp_path / "ckpt"),
        once=True,
        starting_offsets="earliest",
    )
    run_queries(etl.build(spark, args), label="etl", quiet=True)
    first_run = [json.loads(b) for _, b in bodies(broker.url, "etl.totals")]
    # the first run already emits the windows its own data closed
    starts = {datetime.datetime.fromisoformat(r["window_start"]).timestamp() for r in first_run}
    assert starts == {T0, T0 + 10}
    # the watermark a batch uses comes from the batch before; an availableNow run ends
    # with a batch without data that emits what its data closed. A second run, after a
    # later event, closes the late event's window too (the job restarted on its checkpoint)
    generate(broker.url, "etl.in", 1, invalid_every=0, start_ts=T0 + 200, seed=3)
    run_queries(etl.build(spark, args), label="etl", quiet=True)

    expected: dict[tuple[int, str], list[float]] = defaultdict(list)
    invalid = 0
    for _headers, body in bodies(broker.url, "etl.in"):
        try:
            order = json.loads(body)
        except ValueError:
            invalid += 1
            continue
        if "key" not in order:
            invalid += 1
            continue
        start = int(order["ts"] // 10 * 10)
        if start < T0 + 200:  # the last event's window stays open
            expected[(start, order["key"])].append(order["amount"])
    dead = bodies(broker.url, "etl.bad")
    assert len(dead) == invalid == 10
    assert {h["x-invalid-reason"] for h, _ in dead} == {"not JSON", "missing field"}
    results = [json.loads(b) for _, b in bodies(broker.url, "etl.totals")]
    got = {
        (int(datetime.datetime.fromisoformat(r["window_start"]).timestamp()), r["key"]): (
            r["orders"],
            round(r["total"], 2),
        )
        for r in results
    }
    want = {k: (len(v), round(sum(v), 2)) for k, v in expected.items()}
    assert got == want
    assert len(results) == len(want)  # each window's total published once, over both runs
    parquet = spark.read.parquet(str(tmp_path / "totals")).count()
    assert parquet == len(want)
