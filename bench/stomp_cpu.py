"""Roost's server CPU time per STOMP message, for tuning on a shared machine.

    .venv/bin/python bench/stomp_cpu.py [--count 20000] [--repeat 5]
    .venv/bin/python bench/stomp_cpu.py --against /tmp/base/src     # A/B against a checkout
    .venv/bin/python bench/stomp_cpu.py --against-pure   # compiled ÷ pure, paired (issue 27)
    .venv/bin/python bench/stomp_cpu.py --rate 30000 --against-pure  # at a fixed load
    .venv/bin/python bench/stomp_cpu.py --profile FILE

The scenario of bench/stomp_throughput.py (1 producer / 1 consumer over TCP, 1 KiB,
client-individual ACKs, prefetch 100), but what it reports is the server process's
user + system CPU time (``/proc/PID/stat``) per message delivered and acknowledged:
SEND parse, routing, MESSAGE encoding, ACK. Unlike messages per second it hardly depends
on what else runs on the machine, though runs still scatter by a few µs on a busy one.
``--against SRC`` also starts a server from another source tree (``git archive`` of an
older commit, say) and alternates runs between the two, so both see the same load.
``--against-pure`` does the same with this checkout's pure-Python build
(``ROOST_PURE_PYTHON=1``): the paired ratio is then issue 27's compiled ÷ pure broker CPU,
each pair of runs taken a few seconds apart, which this box's drift moves less than the
ratio of two medians taken minutes apart.
``--rate N`` has the producer offer N messages a second (a millisecond's worth at a time)
instead of never waiting: each build is then measured at the same load, as under a
user's steady traffic. Without it, the faster a server is the more often it wakes for
fewer messages (its reads/msg and writes/msg), and each wake costs system calls: a
step that saves user time can show as more CPU per message (docs/compiled.md).
``--profile FILE`` runs the server under cProfile (much slower; only the shares of the
calls mean anything) and prints its top functions. Each run also reports the server's
read and write system calls per message (``syscr``/``syscw`` of /proc/PID/io: how well
its socket I/O is batched); with ``--against``, the paired ratio is the median of the
runs' this/other CPU ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # sibling modules, not a package
import stomp_throughput
from _measure import add_tree_options, cpu_times, io_calls, print_runs, server_env, trees


class Run(NamedTuple):
    """One run's server cost per message: CPU µs (and its user part), and read and
    write system calls."""

    cpu: float
    user: float
    reads: float
    writes: float


@contextlib.contextmanager
def server(src: str | None, profile: str | None, pure: bool = False) -> Iterator[tuple[int, int]]:
    """A Roost server (from ``src`` when given, else this checkout; the pure-Python build
    with ``pure``); yields (pid, port)."""
    port = _brokers.free_port()
    with tempfile.TemporaryDirectory(prefix="bench-roost-cpu-") as tmp:
        cprofile = ["-m", "cProfile", "-o", profile] if profile else []
        cmd = [sys.executable, *cprofile, "-m", "roost", "server", "--amqp-port", "0",
               "--http-port", "0", "--ws-port", "0", "--prometheus-port", "0",
               "--mqtt-port", "0", "--mqtt-ws-port", "0", "--stream-port", "0",
               "--stomp-port", str(port),
               "--data-dir", str(Path(tmp) / "data"), "--log-level", "warning"]
        env = server_env(src, pure)
        log = Path(tmp) / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _brokers._wait_for_port(port, proc, 30, log)
            asyncio.run(stomp_throughput.run_once(port, 2000))  # warm-up
            yield proc.pid, port
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def measure(pid: int, port: int, count: int, rate: int) -> Run:
    """One run: the server's cost per message."""
    user0, sys0 = cpu_times(pid)
    reads0, writes0 = io_calls(pid)
    asyncio.run(stomp_throughput.run_once(port, count, rate=rate))
    time.sleep(0.2)  # the last ACKs reach the server
    user1, sys1 = cpu_times(pid)
    reads1, writes1 = io_calls(pid)
    return Run((user1 + sys1 - user0 - sys0) / count * 1e6, (user1 - user0) / count * 1e6,
               (reads1 - reads0) / count, (writes1 - writes0) / count)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rate", type=int, default=0,
                    help="the producer's messages a second (default: it never waits)")
    add_tree_options(ap)
    ap.add_argument("--profile", metavar="FILE", help="cProfile the server into FILE")
    args = ap.parse_args()
    chosen = trees(args)
    results: dict[str, list[Run]] = {name: [] for name in chosen}
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(
                server(src, None if src or pure else args.profile, pure))
            for name, (src, pure) in chosen.items()
        }
        for run in range(args.repeat):
            # alternate which tree goes first, so neither always runs on a warmer box
            order = list(servers.items()) if run % 2 == 0 else list(servers.items())[::-1]
            for name, (pid, port) in order:
                results[name].append(measure(pid, port, args.count, args.rate))
    offered = f"offered at {args.rate:,} a second" if args.rate else "a producer that never waits"
    print(f"server CPU per message, {args.count} messages a run ({offered}), "
          f"{args.repeat} runs:")
    print_runs(results, paired=len(chosen) == 2)
    if args.profile:
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
