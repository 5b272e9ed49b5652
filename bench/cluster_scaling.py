"""Scaling out on one machine: N independent queues, each with 1 producer and 1 consumer
(``roost perf``, 1 KiB, manual acks, prefetch 100), against Roost on 1 node, Roost as a
cluster of ``--nodes`` nodes, and a RabbitMQ cluster of as many nodes, in the same run.

Queue ``i``'s producer and consumer both connect to node ``i mod nodes`` and declare the
queue there (RabbitMQ's client-local placement; for Roost, the queue's home node), so no
message crosses between nodes: this measures how a machine's cores are used. ``--hop``
adds, for Roost and RabbitMQ clusters, runs where queue ``i`` is declared on node
``i mod nodes`` but its producer and consumer use node ``i + 1 mod nodes``: every message
crosses twice (the publish forwarded to the home node, the delivery relayed back), which
prices the hop.

Reported per configuration (medians over ``--repeat`` alternating runs): aggregate
consumed msg/s, the brokers' CPU (cores, summed over nodes) and broker CPU per consumed
message (µs), then 2-node Roost / 1-node Roost and Roost / RabbitMQ. A last column
projects what each configuration would move if the busiest node had a core of its own
and the load generators ran on other cores (messages per CPU second of the busiest
node): on a small box the ``roost perf`` processes share the brokers' cores, so the
measured ratio cannot show scaling; the projection is labelled as one. ``--only hop``
(or ``single``, ``local``, comma-separated) runs only those shapes.

Where the machine's cores went is printed next to it: the load generators' CPU (the
``roost perf`` processes, from ``getrusage`` of the children) beside the brokers', and
their sum against the machine's cores; ``--pin`` puts broker node ``k`` on core
``k - 1`` (``sched_setaffinity``, as ``taskset`` does) and the load generators on
``--client-cpus`` (default: every core), so that two nodes cannot both land on one core.
When brokers and clients together use every core, the box is saturated and the measured
2-node / 1-node ratio is bounded by the clients' share, not by the brokers.

``--client lean`` drives the queues with ``bench/_lean_client.py`` instead of ``roost
perf`` (a producer writing batches of pre-encoded publishes, a consumer reading frame
headers only: ~2 µs of client CPU per message against ~10), so the brokers get the
cores; ``--spread reuseport`` starts Roost's nodes on one shared AMQP port with
SO_REUSEPORT, as ``roost cluster up`` does, and the kernel picks each connection's node
(RabbitMQ keeps a port per node).

    .venv/bin/python bench/cluster_scaling.py --queues 4 --nodes 2 --duration 10 --repeat 3
    .venv/bin/python bench/cluster_scaling.py --client lean --spread reuseport --queues 8
    .venv/bin/python bench/cluster_scaling.py --only hop --brokers roost --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _brokers import rabbitmq_installed
from _cluster import rabbitmq_cluster, roost_cluster
from _measure import broker_pid, cpu_seconds

Launcher = Callable[[], AbstractContextManager[list[str]]]
REMOTE = ", clients on another node"


SHAPES = ("single", "local", "hop")  # 1 node; N nodes client-local; N nodes, clients off-home


def configurations(
    nodes: int, brokers: list[str], hop: bool, only: tuple[str, ...] = (), shared: bool = False
) -> dict[str, Launcher]:
    """The runs to make; ``only`` keeps those of the shapes named (``--only hop``: the
    cross-node runs alone, with no 1-node or client-local run). ``shared``: Roost's nodes
    share one AMQP port (SO_REUSEPORT) and the kernel picks each connection's node."""
    shapes = set(only) if only else {"single", "local", *(("hop",) if hop else ())}
    out: dict[str, Launcher] = {}
    if "roost" in brokers:
        if "single" in shapes:
            out["Roost, 1 node"] = lambda: roost_cluster(1)
        if "local" in shapes:
            out[f"Roost, {nodes} nodes"] = lambda: roost_cluster(nodes, shared_port=shared)
        if "hop" in shapes:
            out[f"Roost, {nodes} nodes{REMOTE}"] = lambda: roost_cluster(nodes)
    if "rabbitmq" in brokers:
        if "local" in shapes:
            out[f"RabbitMQ, {nodes} nodes"] = lambda: rabbitmq_cluster(nodes)
        if "hop" in shapes:
            out[f"RabbitMQ, {nodes} nodes{REMOTE}"] = lambda: rabbitmq_cluster(nodes)
    return out


def declare_homes(urls: list[str], queues: int) -> None:
    """Queue ``i`` declared on node ``i mod nodes`` (its home), as ``roost perf`` would."""
    import pika

    for i in range(queues):
        with pika.BlockingConnection(pika.URLParameters(urls[i % len(urls)])) as conn:
            conn.channel().queue_declare(f"scale-{i}")


def perf_command(url: str, queue: str, args: argparse.Namespace) -> list[str]:
    if args.client == "lean":  # a producer that never waits, a header-walking consumer
        return [sys.executable, str(Path(__file__).resolve().parent / "_lean_client.py"),
                "--url", url, "--queue", queue, "--size", str(args.size),
                "--prefetch", str(args.prefetch), "--duration", str(args.duration),
                "--batch", str(args.batch), *(["--auto-ack"] if args.auto_ack else [])]  # fmt: skip
    return [sys.executable, "-m", "roost", "perf", "--url", url, "--queue", queue,
            "--producers", "1", "--consumers", "1", "--size", str(args.size),
            "--prefetch", str(args.prefetch), "--duration", str(args.duration),
            "--json",
            *(a for k in range(args.headers) for a in ("--header", f"h{k}=value-{k}"))]  # fmt: skip


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(urls: list[str], args: argparse.Namespace, remote: bool) -> dict[str, float]:
    shift = 0
    if remote and len(urls) > 1:
        declare_homes(urls, args.queues)
        shift = 1
    pids = getattr(urls, "pids", None) or [broker_pid(u) for u in urls]
    cores = sorted(os.sched_getaffinity(0))
    if args.pin:  # node k on core k-1 (a 1-node run: core 0), as taskset -p would
        for k, pid in enumerate(pids):
            os.sched_setaffinity(pid, {cores[k % len(cores)]})
    clients = set(args.client_cpus) if args.client_cpus else None
    cpu_before = [cpu_seconds(p) for p in pids]
    clients_before = children_cpu()
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            perf_command(urls[(i + shift) % len(urls)], f"scale-{i}", args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, clients)) if clients else None,
        )
        for i in range(args.queues)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=args.duration + 120)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if not lines:
            raise RuntimeError(f"roost perf exited with {proc.returncode}: {err[-2000:]}")
        reports.append(json.loads(lines[-1]))
    per_node = [cpu_seconds(p) - before for p, before in zip(pids, cpu_before, strict=True)]
    cpu = sum(per_node)
    consumed = sum(float(r["consume_rate"]) for r in reports)
    # every message a producer sent costs the broker its publish, and most their delivery
    # and ack too: CPU over the whole run per message consumed in it
    messages = sum(int(r["consumed"]) for r in reports)
    return {
        "consume_rate": consumed,
        "broker_cores": cpu / args.duration,  # the brokers idle while perf starts and stops
        "cpu_us_per_msg": cpu / messages * 1e6 if messages else float("nan"),
        # the load generators' cores (their whole lives, start-up included, over the
        # duration): with the brokers', what the box had left
        "client_cores": (children_cpu() - clients_before) / args.duration,
        "client_us_per_msg": (children_cpu() - clients_before) / messages * 1e6
        if messages else float("nan"),
        # a projection, not a measurement: the rate if the busiest node had a core of its
        # own and the load generators ran elsewhere (CPU-bound: messages per CPU second
        # of the busiest node)
        "projected_rate": messages / max(per_node) if messages and max(per_node) else 0.0,
        "wall_s": time.monotonic() - started,
    }


def run(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    configs = configurations(args.nodes, args.brokers, args.hop, args.only,
                             shared=args.spread == "reuseport")  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    for attempt in range(args.repeat):
        order = list(configs) if attempt % 2 == 0 else list(reversed(configs))
        for name in order:
            with configs[name]() as urls:
                result = one_run(urls, args, name.endswith(REMOTE))
            results[name].append(result)
            print(f"# run {attempt + 1} {name}: {json.dumps(result)}", file=sys.stderr)
    return results


def table(results: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> Iterator[str]:
    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    ack = "auto-ack" if args.auto_ack else "manual ack"
    client = ("lean client (bench/_lean_client.py: batches of "
              f"{args.batch} publishes per write, multiple acks)"
              if args.client == "lean" else "roost perf")  # fmt: skip
    spread = ("Roost's nodes share one port (SO_REUSEPORT), the kernel spreads connections"
              if args.spread == "reuseport" else "clients on their queue's node")  # fmt: skip
    yield (f"{args.queues} queues, 1 producer + 1 consumer each, {args.size} B, {ack}, "
           f"prefetch {args.prefetch}, {args.headers} headers, {args.duration:g} s x {args.repeat} "
           f"(medians); {client}; {spread}")  # fmt: skip
    yield ""
    cores = len(os.sched_getaffinity(0))
    pinned = " (brokers pinned a core each)" if args.pin else ""
    yield ("| configuration | consumed msg/s | broker CPU (cores) | client CPU (cores) "
           f"| of the box's {cores} cores | broker CPU µs / msg | client CPU µs / msg "
           "| projected msg/s, a core per node |")  # fmt: skip
    yield "|---|---|---|---|---|---|---|---|"
    for name in results:
        used = med(name, "broker_cores") + med(name, "client_cores")
        yield (f"| {name}{pinned} | {med(name, 'consume_rate'):,.0f} "
               f"| {med(name, 'broker_cores'):.2f} | {med(name, 'client_cores'):.2f} "
               f"| {used / cores:.0%} | {med(name, 'cpu_us_per_msg'):.1f} "
               f"| {med(name, 'client_us_per_msg'):.1f} "
               f"| {med(name, 'projected_rate'):,.0f} |")  # fmt: skip
    one, many = "Roost, 1 node", f"Roost, {args.nodes} nodes"
    rabbit = f"RabbitMQ, {args.nodes} nodes"
    yield ""
    if one in results and many in results:
        yield f"{many} / {one}: {med(many, 'consume_rate') / med(one, 'consume_rate'):.2f}x"
        projected = med(many, "projected_rate") / med(one, "projected_rate")
        yield (f"{many} / {one}, projected (each node a core of its own, load generators "
               f"elsewhere; from measured CPU per message, not a measured rate): "
               f"{projected:.2f}x")  # fmt: skip
        # what the box can show: msg/s per broker core used, 2 nodes against 1 (a ratio
        # below 1: a node does more CPU work per message in a cluster)
        per_core = {n: med(n, "consume_rate") / med(n, "broker_cores") for n in (one, many)}
        yield (f"{many} / {one}, msg/s per broker core used: {per_core[many]:,.0f} / "
               f"{per_core[one]:,.0f} = {per_core[many] / per_core[one]:.2f}; brokers used "
               f"{med(one, 'broker_cores'):.2f} -> {med(many, 'broker_cores'):.2f} cores, "
               f"clients {med(one, 'client_cores'):.2f} -> {med(many, 'client_cores'):.2f} "
               f"of {cores}")  # fmt: skip
    if many in results and rabbit in results:
        yield f"{many} / {rabbit}: {med(many, 'consume_rate') / med(rabbit, 'consume_rate'):.2f}x"
    for name in (many, rabbit):
        far = name + REMOTE
        if name in results and far in results:
            hop = (med(far, "cpu_us_per_msg") - med(name, "cpu_us_per_msg")) / 2
            yield (f"{far}: {med(far, 'consume_rate') / med(name, 'consume_rate'):.2f}x of "
                   f"client-local; one crossing costs {hop:.1f} µs of broker CPU")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--prefetch", type=int, default=100)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    parser.add_argument("--hop", action="store_true", help="add runs with clients off-home")
    parser.add_argument("--headers", type=int, default=0,
                        help="string headers on every message (0: none)")
    parser.add_argument("--pin", action="store_true", help="broker node k on core k-1")
    parser.add_argument("--client", choices=("perf", "lean"), default="perf",
                        help="load generator: roost perf, or bench/_lean_client.py (about a "
                        "tenth of the CPU per message)")
    parser.add_argument("--batch", type=int, default=32,
                        help="lean client: publishes per write")
    parser.add_argument("--auto-ack", action="store_true", help="lean client: no_ack consumers")
    parser.add_argument("--spread", choices=("ports", "reuseport"), default="ports",
                        help="ports: queue i's clients on node i mod N (each node its own "
                        "port); reuseport: Roost's nodes share one port as `roost cluster up` "
                        "does and the kernel picks each connection's node")
    parser.add_argument(
        "--client-cpus", type=lambda v: [int(c) for c in v.split(",")], default=[],
        help="cores for the load generators, comma-separated (default: every core)",
    )  # fmt: skip
    parser.add_argument(
        "--only", default="",
        help=f"comma-separated shapes to run, of {','.join(SHAPES)} (hop: clients off-home)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.only = tuple(s for s in args.only.split(",") if s)
    if set(args.only) - set(SHAPES):
        parser.error(f"--only takes {', '.join(SHAPES)}")
    args.brokers = args.brokers.split(",")
    if "rabbitmq" in args.brokers and not rabbitmq_installed():
        print("# rabbitmq-server not installed: Roost only", file=sys.stderr)
        args.brokers.remove("rabbitmq")
    results: Any = run(args)
    for line in table(results, args):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
