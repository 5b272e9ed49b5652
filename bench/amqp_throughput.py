"""AMQP throughput of Roost next to RabbitMQ, measured with ``roost perf``.

    .venv/bin/python bench/amqp_throughput.py [--brokers roost,rabbitmq]
        [--scenarios 1,2,3,4] [--repeat 3] [--duration 10]

Every scenario runs ``--repeat`` times per broker, brokers alternating, and the
table shows medians. Raw JSON lines go to bench/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package
from _measure import broker_pid, cpu_seconds

NONE = "-"
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    args: tuple[str, ...]
    declares: bool = False


SCENARIOS = {
    s.key: s
    for s in [
        Scenario("1", "1 producer / 1 consumer, 16 B, auto-ack",
                 ("--producers", "1", "--consumers", "1", "--size", "16", "--auto-ack")),
        Scenario("2", "1 producer / 1 consumer, 1 KiB, auto-ack",
                 ("--producers", "1", "--consumers", "1", "--size", "1024", "--auto-ack")),
        Scenario("3", "2 producers / 4 consumers, 16 B, prefetch 100, manual ack",
                 ("--producers", "2", "--consumers", "4", "--size", "16", "--prefetch", "100")),
        Scenario("4", "10,000 queue declares", ("--queue-declares", "10000"), declares=True),
        Scenario("5", "1 producer / 1 consumer, 1 KiB persistent, confirms (window 1000), "
                 "prefetch 100, manual ack",
                 ("--producers", "1", "--consumers", "1", "--size", "1024", "--persistent",
                  "--confirm", "1000", "--prefetch", "100")),
    ]
}


def perf(url: str, scenario: Scenario, duration: float, queue: str, log: Any) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "roost", "perf", "--url", url, "--duration", str(duration),
           "--queue", queue, *scenario.args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                          timeout=duration + 120, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"roost perf exited with {proc.returncode} and no report: {cmd}")
    report: dict[str, Any] = json.loads(lines[-1])
    report["exit_code"] = proc.returncode
    return report


def throughput(r: dict[str, Any]) -> float:
    """Declares/s; else deliveries/s, or publishes/s when nothing consumes."""
    if r["mode"] == "queue-declares":
        return float(r["declare_rate"])
    return float(r["consume_rate"] if r.get("consumers") else r["publish_rate"])


def _cpu_per_message(seconds: float, r: dict[str, Any]) -> float | None:
    """The broker's CPU (user + system) over a run, per message delivered (published
    when nothing consumes); it includes the run's connection set-up and drain."""
    if r["mode"] == "queue-declares":
        return None
    count = r.get("consumed") if r.get("consumers") else r.get("published")
    return seconds / count * 1e6 if count else None


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(v: float | None) -> str:
    return NONE if v is None else f"{v:,.0f}"


def table(brokers: list[str], scenarios: list[Scenario],
          results: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    names = [_brokers.TITLES[b] for b in brokers]
    head = ["scenario", *(f"{n} msg/s (median)" for n in names)]
    if len(brokers) == 2:
        head.append("ratio")
    head += [f"{n} publish/s" for n in names]
    head += [f"{n} p50 / p99 µs" for n in names]
    head += [f"{n} broker CPU µs/msg" for n in names]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scenarios:
        rates = [_median([throughput(r) for r in results.get((b, s.key), [])]) for b in brokers]
        cells = [s.title, *map(_fmt, rates)]
        if len(brokers) == 2:
            a, b = rates
            cells.append(f"{a / b:.2f}" if a is not None and b else NONE)
        for b in brokers:
            runs = results.get((b, s.key), [])
            cells.append(NONE if s.declares else _fmt(_median([r["publish_rate"] for r in runs])))
        for b in brokers:
            lat = [r["latency_us"] for r in results.get((b, s.key), []) if r.get("latency_us")]
            if s.declares or not lat:
                cells.append(NONE)
            else:
                cells.append(f"{_fmt(_median([x['p50'] for x in lat]))} / "
                             f"{_fmt(_median([x['p99'] for x in lat]))}")
        for b in brokers:
            cpu = [r["broker_cpu_us"] for r in results.get((b, s.key), [])
                   if r.get("broker_cpu_us") is not None]
            cells.append(NONE if s.declares or not cpu else f"{_median(cpu):.1f}")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def run_scenarios(name: str, brokers: list[str], scenarios: Sequence[Scenario], repeat: int,
                  duration: float) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], Path]:
    """Start each broker once, run every scenario ``repeat`` times per broker (brokers
    alternating), keep the raw JSON lines in bench/results/NAME-TIME.jsonl."""
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    raw_path = RESULTS / f"{name}-{stamp}.jsonl"
    log_path = RESULTS / f"{name}-{stamp}.log"
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with contextlib.ExitStack() as stack, open(raw_path, "w") as raw, open(log_path, "w") as log:
        urls, pids = {}, {}
        for b in brokers:
            print(f"starting {_brokers.TITLES[b]}…", file=sys.stderr, flush=True)
            urls[b] = stack.enter_context(_brokers.LAUNCHERS[b]())
            pids[b] = broker_pid(urls[b])  # beam.smp for RabbitMQ
        for s in scenarios:
            for rep in range(repeat):
                # Alternate which broker goes first so neither always runs on a warmer box.
                order = brokers if rep % 2 == 0 else brokers[::-1]
                for b in order:
                    print(f"scenario {s.key} run {rep + 1}/{repeat}: {_brokers.TITLES[b]}",
                          file=sys.stderr, flush=True)
                    log.write(f"## scenario {s.key} run {rep + 1} {b}\n")
                    log.flush()
                    try:
                        # A queue per run: a late publish of one run never reaches the next.
                        queue = f"bench-{s.key}-{rep + 1}"
                        cpu0 = cpu_seconds(pids[b])
                        report = perf(urls[b], s, duration, queue, log)
                        report["broker_cpu_us"] = _cpu_per_message(
                            cpu_seconds(pids[b]) - cpu0, report)
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:
                        print(f"  failed: {exc}", file=sys.stderr)
                        continue
                    if report.get("errors") or report["exit_code"]:
                        print(f"  errors: {report.get('errors')}", file=sys.stderr)
                    print(f"  {throughput(report):,.0f}/s", file=sys.stderr, flush=True)
                    raw.write(json.dumps({"broker": b, "scenario": s.key, "run": rep + 1,
                                          **report}) + "\n")
                    raw.flush()
                    results.setdefault((b, s.key), []).append(report)
    return results, raw_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    parser.add_argument("--scenarios", default="1,2,3,4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    args = parser.parse_args(argv)

    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    unknown = [b for b in brokers if b not in _brokers.LAUNCHERS]
    if unknown:
        parser.error(f"unknown broker(s): {', '.join(unknown)}")
    if "rabbitmq" in brokers and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipping its columns", file=sys.stderr)
        brokers.remove("rabbitmq")
    if not brokers:
        parser.error("no broker to run")
    try:
        scenarios = [SCENARIOS[k.strip()] for k in args.scenarios.split(",") if k.strip()]
    except KeyError as exc:
        parser.error(f"unknown scenario {exc}")

    results, raw_path = run_scenarios("amqp_throughput", brokers, scenarios, args.repeat,
                                      args.duration)
    print(f"Throughput = messages delivered to consumers per second (declares/s for "
          f"scenario 4); {args.repeat} run(s) of {args.duration:g} s each, medians. Scenario 3 "
          "keeps 16 B bodies so it measures per-message work (acks, prefetch) rather than "
          f"bytes. Raw results: {raw_path}\n")
    print(table(brokers, scenarios, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
