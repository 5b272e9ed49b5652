"""A replicated quorum queue's throughput: a 3-node Roost cluster against a 3-node
RabbitMQ cluster, in the same run, on this machine's loopback.

One quorum queue (``x-queue-type: quorum``, group size 3) declared on node 1, which
leads it on both brokers; one producer and one consumer (``roost perf``) on node 1:
1 KiB persistent messages, publisher confirms with at most ``--confirm`` unconfirmed
(1000), manual acks with prefetch ``--prefetch`` (100). Every confirm waits until a
majority of the three nodes holds the message on disk. The runs alternate between the
brokers ``--repeat`` times (a fresh queue each run); reported: medians of the consumed
and confirmed rates, the brokers' CPU (cores, the three nodes summed) and their RSS
(MB, summed) at the end of the runs, and Roost / RabbitMQ.

    .venv/bin/python bench/quorum_throughput.py --duration 10 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import rabbitmq_installed
from _cluster import rabbitmq_cluster, roost_cluster
from _measure import broker_pid, cpu_seconds, rss_mb

NODES = 3
Launcher = Callable[[], AbstractContextManager[list[str]]]


def declare(url: str, queue: str) -> None:
    import pika

    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        args = {"x-queue-type": "quorum", "x-quorum-initial-group-size": NODES}
        conn.channel().queue_declare(queue, durable=True, arguments=args)


def delete(url: str, queue: str) -> None:
    import pika

    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        conn.channel().queue_delete(queue)


def one_run(urls: list[str], queue: str, args: argparse.Namespace) -> dict[str, float]:
    declare(urls[0], queue)
    pids = [broker_pid(u) for u in urls]
    cpu_before = sum(cpu_seconds(p) for p in pids)
    cmd = [sys.executable, "-m", "roost", "perf", "--url", urls[0], "--queue", queue,
           "--durable-queue", "--queue-arg", "x-queue-type=quorum", "--persistent",
           "--size", "1024", "--confirm", str(args.confirm), "--prefetch", str(args.prefetch),
           "--duration", str(args.duration), "--json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 180)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"roost perf exited with {done.returncode}: {done.stderr[-2000:]}")
    report = json.loads(lines[-1])
    cpu = sum(cpu_seconds(p) for p in pids) - cpu_before
    rss = sum(rss_mb(p) for p in pids)
    delete(urls[0], queue)
    return {
        "consume_rate": float(report["consume_rate"]),
        "publish_rate": float(report["publish_rate"]),
        "broker_cores": cpu / args.duration,
        "rss_mb": rss,
    }


def brokers(args: argparse.Namespace) -> dict[str, Launcher]:
    out: dict[str, Launcher] = {"Roost": lambda: roost_cluster(NODES)}
    if not args.no_rabbitmq:
        if not rabbitmq_installed():
            raise SystemExit("RabbitMQ is not installed (or pass --no-rabbitmq)")
        out["RabbitMQ 3.10"] = lambda: rabbitmq_cluster(NODES)
    return out


def run(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {}
    with ExitStack() as stack:
        clusters = {name: stack.enter_context(launch()) for name, launch in brokers(args).items()}
        time.sleep(2.0)  # the Roost nodes see each other running (the group is chosen so)
        for k in range(args.repeat):
            for name, urls in clusters.items():
                r = one_run(urls, f"qq-bench-{k}", args)
                results.setdefault(name, []).append(r)
                print(
                    f"  {name} run {k + 1}: {r['consume_rate']:,.0f} msg/s consumed, "
                    f"{r['broker_cores']:.2f} cores, {r['rss_mb']:.0f} MB",
                    file=sys.stderr,
                )
    return results


def table(results: dict[str, list[dict[str, float]]]) -> Iterator[str]:
    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    yield "| broker (3 nodes) | consumed msg/s | confirmed msg/s | broker cores | RSS MB |"
    yield "|---|---|---|---|---|"
    for name in results:
        yield (f"| {name} | {med(name, 'consume_rate'):,.0f} | {med(name, 'publish_rate'):,.0f} "
               f"| {med(name, 'broker_cores'):.2f} | {med(name, 'rss_mb'):.0f} |")  # fmt: skip
    if "Roost" in results and "RabbitMQ 3.10" in results:
        ratio = med("Roost", "consume_rate") / med("RabbitMQ 3.10", "consume_rate")
        runs = len(results["Roost"])
        yield f"\nRoost / RabbitMQ (consumed msg/s, medians over {runs} runs): {ratio:.2f}x"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    p.add_argument("--repeat", type=int, default=3, help="runs per broker, alternating")
    p.add_argument("--confirm", type=int, default=1000, help="unconfirmed publishes at most")
    p.add_argument("--prefetch", type=int, default=100)
    p.add_argument("--no-rabbitmq", action="store_true")
    args = p.parse_args(argv)
    for line in table(run(args)):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
