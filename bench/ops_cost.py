"""What the firehose and the latency histograms cost: the broker's CPU time per message
with each switched off and on, Roost and RabbitMQ in the same run.

    .venv/bin/python bench/ops_cost.py [--repeat 3] [--duration 5] [--rate 4000]

Every broker gets the same load, ``roost perf`` with 1 producer (publisher confirms, at
most 100 unconfirmed, ``--rate`` messages a second), 1 consumer (manual acks, prefetch
100), 16-byte bodies: the same messages each second, so the CPU time per message is what
differs. Around every run the broker's CPU time (user + system, ``/proc/PID/stat``) is
read and divided by the messages published; CPU time, not wall clock, so what else runs
on the machine matters much less. Runs alternate between the brokers, the order turned
each repeat. Brokers:

- Roost with ``--latency-sample 0`` (no latency histograms), ``16`` (the default: one
  message in 16 timed), ``1`` (every message timed);
- Roost and RabbitMQ with tracing off, and on (``roost ctl trace_on``, the same call for
  both) with a queue bound to ``amq.rabbitmq.trace`` for every copy (``#``, its length
  capped at 1000 so old copies drop).

Medians go to stdout as a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # sibling modules, not a package
from _measure import broker_pid, cpu_seconds
from amqp_throughput import Scenario, perf

LOAD = ("--producers", "1", "--consumers", "1", "--size", "16", "--prefetch", "100",
        "--confirm", "100")  # fmt: skip


def ctl(http: str, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "roost", "ctl", "--url", http, *args], check=True,
                   capture_output=True, timeout=60)  # fmt: skip


def trace_tap(http: str) -> None:
    """Every firehose copy taken by a capped queue (as a trace reader would)."""
    ctl(http, "declare", "queue", "trace.tap", "--transient", "--argument", "x-max-length=1000")
    ctl(http, "declare", "binding", "amq.rabbitmq.trace", "trace.tap", "--routing-key", "#")


@contextlib.contextmanager
def roost(*extra: str, trace: bool = False) -> Iterator[tuple[str, str]]:
    port = _brokers.free_port()
    http = f"http://127.0.0.1:{port}"
    with _brokers.roost("--http-port", str(port), *extra) as url:
        trace_tap(http)
        if trace:
            ctl(http, "trace_on")
        yield url, http


@contextlib.contextmanager
def rabbitmq() -> Iterator[tuple[str, str]]:
    """One node for both RabbitMQ rows (a second would need another node name): tracing
    is switched on and off before each run."""
    port = _brokers.free_port()
    conf = f"management.tcp.port = {port}\nmanagement.tcp.ip = 127.0.0.1\n"
    http = f"http://127.0.0.1:{port}"
    with _brokers.rabbitmq(plugins=("rabbitmq_management",), extra_conf=conf) as url:
        trace_tap(http)
        yield url, http


BROKERS = {
    "roost-latency-0": ("Roost, latency histograms off", lambda: roost("--latency-sample", "0")),
    "roost-latency-16": ("Roost, 1 message in 16 timed (default)",
                         lambda: roost("--latency-sample", "16")),
    "roost-latency-1": ("Roost, every message timed", lambda: roost("--latency-sample", "1")),
    "roost-trace": ("Roost, tracing on (default latency)", lambda: roost(trace=True)),
    "rabbitmq": ("RabbitMQ 3.10, tracing off", rabbitmq),
    "rabbitmq-trace": ("RabbitMQ 3.10, tracing on", rabbitmq),
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default=",".join(BROKERS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=4000.0)
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.brokers.split(",") if k.strip()]
    if not _brokers.rabbitmq_installed():
        keys = [k for k in keys if not k.startswith("rabbitmq")]
    load = Scenario("ops", "ops", (*LOAD, "--rate", str(args.rate)))
    per_message: dict[str, list[float]] = {k: [] for k in keys}
    with contextlib.ExitStack() as stack, open(os.devnull, "w") as log:
        servers: dict[str, tuple[str, str, int]] = {}
        for key in keys:
            if key == "rabbitmq-trace" and "rabbitmq" in servers:
                servers[key] = servers["rabbitmq"]
                continue
            url, http = stack.enter_context(BROKERS[key][1]())
            servers[key] = (url, http, broker_pid(url))
            if key == "rabbitmq-trace":
                servers["rabbitmq"] = servers[key]
        for rep in range(args.repeat):
            for key in keys if rep % 2 == 0 else list(reversed(keys)):
                url, http, pid = servers[key]
                if key.startswith("rabbitmq"):
                    ctl(http, "trace_on" if key == "rabbitmq-trace" else "trace_off")
                before = cpu_seconds(pid)
                report = perf(url, load, args.duration, f"ops-{rep}", log)
                used = cpu_seconds(pid) - before
                sent = report["published"]
                us = used / sent * 1e6 if sent else float("nan")
                per_message[key].append(us)
                print(f"{key} run {rep + 1}: {sent:,} messages, {used:.2f} s CPU, "
                      f"{us:.1f} µs a message", file=sys.stderr, flush=True)  # fmt: skip
    print(f"| broker ({args.rate:,.0f} msg/s, confirms, 1 consumer) | CPU µs a message "
          "(median) | vs. its own baseline |")  # fmt: skip
    print("|---|---|---|")
    medians = {k: statistics.median(v) for k, v in per_message.items()}
    for key in keys:
        base = medians.get("rabbitmq" if key.startswith("rabbitmq") else "roost-latency-0")
        change = f"{100 * (medians[key] - base) / base:+.1f}%" if base else ""
        print(f"| {BROKERS[key][0]} | {medians[key]:.1f} | {change} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
