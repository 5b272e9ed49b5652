"""Round-trip latency of a well-behaved client while others abuse the broker.

    .venv/bin/python bench/abuse_latency.py [--brokers roost,rabbitmq]
        [--scenarios none,slowloris,flood,huge,storm] [--repeat 3] [--messages 3000]

The good client (tests/security/abusers.py: GoodClient) publishes one 16-byte message
at a time with publisher confirms and waits until its own consumer has it; p50 and p99
of that round trip over ``--messages`` messages, with no abuse and during each abuse
scenario. The abuser runs in its own process (so that it does not share the good
client's GIL) and keeps going for the whole measurement:

- slowloris: 200 sockets dripping the AMQP header and a start-ok one byte per 100 ms
  each; every one the handshake timeout (1 s) drops is replaced;
- flood: 4 threads opening 60 connections against a limit of 30, closing them, again;
- huge: raw connections sending a frame header that claims 2 GiB, one after another;
- storm: 3 publishers of 64 KiB messages with confirms, one consumer draining.

The "abuse/s" columns are what the abuser achieved per second, from its start to the end
of the measurement (sockets dropped, connections refused, huge frames answered with 501,
storm messages confirmed), so that a run where the abuse did not happen shows.

Every scenario runs ``--repeat`` times per broker, brokers alternating; the table shows
medians. Both brokers get the same limits (handshake timeout 1 s, 30 connections).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package

sys.path.insert(0, str(_brokers.ROOT))
from tests.security.abusers import (  # after the path is set
    Drainer,
    Flood,
    GoodClient,
    PublishStorm,
    Slowloris,
    huge_frame,
    percentile,
)

SCENARIOS = ["none", "slowloris", "flood", "huge", "storm"]
TITLES = {
    "none": "no abuse",
    "slowloris": "slowloris (200 sockets, 1 byte / 100 ms each)",
    "flood": "connection flood (60 at a time, limit 30)",
    "huge": "huge frames (2 GiB frame headers, back to back)",
    "storm": "publish storm (3 publishers, 64 KiB, confirms)",
}
ROOST_ARGS = ("--handshake-timeout", "1", "--max-connections", "30")
RABBITMQ_CONF = "handshake_timeout = 1000\nconnection_max = 30\n"


def _abuse(kind: str, url: str, stop: Any, started: Any, done: Any) -> None:
    """Runs in a child process until ``stop`` is set; ``done`` counts what the abuse
    achieved (sockets dropped, connections refused, frames refused, messages confirmed),
    so that a run where the abuser silently failed shows."""
    port = urlparse(url).port or 5672
    finish: Callable[[], None]
    if kind == "slowloris":
        loris = Slowloris(port, count=200, interval=0.1, keep_up=True)
        loris.start()
        finish, count = loris.stop, lambda: len(loris.lifetimes)
    elif kind == "flood":
        flood = Flood(url, count=60, workers=4, repeat=True)
        flood.start()
        finish, count = flood.stop, lambda: len(flood.refusals)
    elif kind == "huge":
        refused = [0]

        def hammer() -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError, AssertionError, EOFError):
                    refused[0] += huge_frame(port) == 501

        thread = threading.Thread(target=hammer, daemon=True)
        thread.start()
        finish, count = thread.join, lambda: refused[0]
    elif kind == "storm":
        queue = f"storm-{uuid.uuid4().hex[:8]}"
        drainer = Drainer(url, queue)
        drainer.start()
        drainer.ready.wait(10)
        storm = PublishStorm(url, queue, publishers=3, size=64 * 1024).start()

        def finish() -> None:
            storm.stop()
            drainer.stop()

        count = lambda: len(storm.confirmed)  # noqa: E731
    else:
        raise ValueError(kind)
    started.set()
    while not stop.wait(0.1):
        done.value = count()
    finish()


@contextlib.contextmanager
def abuse(kind: str, url: str, done: Any) -> Iterator[None]:
    if kind == "none":
        yield
        return
    ctx = multiprocessing.get_context("spawn")
    stop, started = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_abuse, args=(kind, url, stop, started, done), daemon=True)
    proc.start()
    try:
        if not started.wait(30):
            raise RuntimeError(f"abuser {kind} did not start")
        time.sleep(1.0)  # let the abuse reach its steady state before measuring
        yield
    finally:
        stop.set()
        proc.join(60)
        if proc.is_alive():
            proc.kill()
            proc.join()


def measure(url: str, kind: str, messages: int) -> dict[str, float]:
    # connected before the abuse starts (a flood would take its slot), measured during it
    client = GoodClient(url, f"good-{uuid.uuid4().hex[:8]}", limit=messages,
                        round_trip_timeout=30)
    client.go.clear()
    client.start()
    client.ready.wait(30)
    done = multiprocessing.get_context("spawn").Value("q", 0)
    with abuse(kind, url, done):
        abuse_started = time.monotonic() - (1.0 if kind != "none" else 0.0)  # + warm-up
        client.go.set()
        client.join(300)
        rate = done.value / max(1e-3, time.monotonic() - abuse_started)
    if client.error is not None or len(client.latencies) < messages:
        raise RuntimeError(f"good client failed during {kind}: {client.error!r}")
    client.check()
    ms = [x * 1000 for x in client.latencies]
    return {"p50": percentile(ms, 0.5), "p99": percentile(ms, 0.99), "max": max(ms),
            "abuse": rate}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--messages", type=int, default=3000)
    args = ap.parse_args()
    brokers = [b for b in args.brokers.split(",") if b]
    if "rabbitmq" in brokers and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipping it", file=sys.stderr)
        brokers.remove("rabbitmq")
    scenarios = [s for s in args.scenarios.split(",") if s]
    launchers: dict[str, Callable[[], Any]] = {
        "roost": lambda: _brokers.roost(*ROOST_ARGS),
        "rabbitmq": lambda: _brokers.rabbitmq(extra_conf=RABBITMQ_CONF),
    }
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        urls = {b: stack.enter_context(launchers[b]()) for b in brokers}
        for scenario in scenarios:
            for run in range(args.repeat):
                order = brokers if run % 2 == 0 else brokers[::-1]
                for broker in order:
                    figures = measure(urls[broker], scenario, args.messages)
                    results.setdefault((broker, scenario), []).append(figures)
                    print(f"{broker} {scenario} run {run + 1}: p50 {figures['p50']:.2f} ms "
                          f"p99 {figures['p99']:.2f} ms max {figures['max']:.1f} ms, "
                          f"abuse {figures['abuse']:.0f}/s",
                          file=sys.stderr, flush=True)
    print_table(brokers, scenarios, results)


def print_table(brokers: list[str], scenarios: list[str],
                results: dict[tuple[str, str], list[dict[str, float]]]) -> None:
    head = ["scenario"]
    for b in brokers:
        head += [f"{_brokers.TITLES[b]} p50 ms", f"{_brokers.TITLES[b]} p99 ms"]
    if len(brokers) == 2:
        head.append("p99 ratio (Roost / RabbitMQ)")
    head += [f"{_brokers.TITLES[b]} abuse/s" for b in brokers]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for s in scenarios:
        row = [TITLES[s]]
        p99s = []
        for b in brokers:
            runs = results[(b, s)]
            p50 = statistics.median(r["p50"] for r in runs)
            p99 = statistics.median(r["p99"] for r in runs)
            p99s.append(p99)
            row += [f"{p50:.2f}", f"{p99:.2f}"]
        if len(brokers) == 2:
            row.append(f"{p99s[0] / p99s[1]:.2f}")
        row += [f"{statistics.median(r['abuse'] for r in results[(b, s)]):.0f}"
                for b in brokers]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
