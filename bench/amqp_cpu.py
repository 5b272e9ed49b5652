"""Roost's server CPU time per AMQP message, for tuning on a shared machine.

    .venv/bin/python bench/amqp_cpu.py [--duration 5] [--repeat 5]
    .venv/bin/python bench/amqp_cpu.py --against /tmp/base/src     # A/B against a checkout
    .venv/bin/python bench/amqp_cpu.py --persistent --against-pure  # compiled ÷ pure, paired
    .venv/bin/python bench/amqp_cpu.py --profile FILE
    .venv/bin/python bench/amqp_cpu.py --persistent   # persistent, confirms (window 1000)

The AMQP twin of bench/stomp_cpu.py: ``roost perf`` runs 1 producer and 1 consumer over
TCP (1 KiB, manual acks, prefetch 100, a producer that never waits) for ``--duration``
seconds, and what is reported is the server process's user + system CPU time
(``/proc/PID/stat``) per message consumed: publish parse, routing, delivery encoding,
ack. Unlike messages per second it hardly depends on what else runs on the machine.
``--against SRC`` also starts a server from another source tree (``git archive`` of an
older commit, say) and alternates runs between the two, so both see the same load; the
load generator is this checkout's ``roost perf`` for both; ``--against-pure`` pairs this
checkout with its own pure-Python build (``ROOST_PURE_PYTHON=1``), issue 27's compiled ÷
pure broker CPU as a paired ratio. ``--profile FILE`` runs the
server under cProfile (much slower; only the shares of the calls mean anything).
``--persistent`` runs bench/amqp_throughput.py's scenario 5 instead: persistent messages,
publisher confirms (window 1000); the store's append, group
commit and ack paths are in what is measured only with ``--durable`` as well (the
scenario's queue is not durable, so its persistent messages are never written).
``--size 16 --auto-ack`` is scenario 1 (``--size`` sets the body size, ``--auto-ack``
consumes without acks or prefetch). Each run also reports the server's read and write
system calls per message (``syscr``/``syscw`` of /proc/PID/io: how well its socket
I/O is batched); with ``--against``, the paired ratio is the median of the runs'
this/other CPU ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
import _brokers  # a sibling module, not a package
from _measure import add_tree_options, cpu_times, io_calls, print_runs, server_env, trees

PERF_ARGS = ["--producers", "1", "--consumers", "1", "--size", "1024", "--prefetch", "100"]
PERSISTENT_ARGS = ("--persistent", "--confirm", "1000")
EXTRA_ARGS: list[str] = []  # PERSISTENT_ARGS with --persistent, and --durable-queue


class Run(NamedTuple):
    """One run's server cost per message consumed: CPU µs (and its user part), and
    read and write system calls."""

    cpu: float
    user: float
    reads: float
    writes: float


@contextlib.contextmanager
def server(src: str | None, profile: str | None, pure: bool = False) -> Iterator[tuple[int, int]]:
    """A Roost server (from ``src`` when given, else this checkout; the pure-Python build
    with ``pure``); yields (pid, port)."""
    port = _brokers.free_port()
    with tempfile.TemporaryDirectory(prefix="bench-roost-amqp-cpu-") as tmp:
        cprofile = ["-m", "cProfile", "-o", profile] if profile else []
        cmd = [sys.executable, *cprofile, "-m", "roost", "server", "--amqp-port", str(port),
               "--http-port", "0", "--ws-port", "0", "--stomp-port", "0",
               "--mqtt-port", "0", "--mqtt-ws-port", "0", "--stream-port", "0",
               "--data-dir", str(Path(tmp) / "data"), "--log-level", "warning"]
        tree = Path(src) if src else Path(__file__).resolve().parents[1] / "src"
        if "prometheus_port" in (tree / "roost" / "config.py").read_text():
            cmd += ["--prometheus-port", "0"]  # a tree from before it has no such flag
        env = server_env(src, pure)
        log = Path(tmp) / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            _brokers._wait_for_port(port, proc, 30, log)
            run_perf(port, 1.0, "warm-up")
            yield proc.pid, port
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def run_perf(port: int, duration: float, queue: str) -> int:
    """One ``roost perf`` run (this checkout's); the messages its consumer received."""
    cmd = [sys.executable, "-m", "roost", "perf", "--url", f"amqp://guest:guest@127.0.0.1:{port}/%2F",
           "--duration", str(duration), "--queue", queue, *PERF_ARGS, *EXTRA_ARGS]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          timeout=duration + 120, check=False, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"roost perf exited with {proc.returncode} and no report")
    return int(json.loads(lines[-1])["consumed"])


def measure(pid: int, port: int, duration: float, run: int) -> Run:
    """One run: the server's cost per message consumed."""
    user0, sys0 = cpu_times(pid)
    reads0, writes0 = io_calls(pid)
    consumed = run_perf(port, duration, f"cpu-{run}")
    time.sleep(0.2)  # the last acks reach the server
    user1, sys1 = cpu_times(pid)
    reads1, writes1 = io_calls(pid)
    return Run((user1 + sys1 - user0 - sys0) / consumed * 1e6, (user1 - user0) / consumed * 1e6,
               (reads1 - reads0) / consumed, (writes1 - writes0) / consumed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of load a run")
    ap.add_argument("--repeat", type=int, default=5)
    add_tree_options(ap)
    ap.add_argument("--profile", metavar="FILE", help="cProfile the server into FILE")
    ap.add_argument("--persistent", action="store_true",
                    help="persistent messages, confirms (window 1000): scenario 5")
    ap.add_argument("--durable", action="store_true", help="declare the queue durable")
    ap.add_argument("--size", type=int, default=1024, help="message body size (1024)")
    ap.add_argument("--auto-ack", action="store_true",
                    help="consume with auto-ack, no prefetch (scenarios 1 and 2)")
    args = ap.parse_args()
    PERF_ARGS[PERF_ARGS.index("--size") + 1] = str(args.size)
    if args.auto_ack:
        del PERF_ARGS[PERF_ARGS.index("--prefetch") :]
        PERF_ARGS.append("--auto-ack")
    EXTRA_ARGS[:] = (PERSISTENT_ARGS if args.persistent else ()) + (
        ("--durable-queue",) if args.durable else ())
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
                results[name].append(measure(pid, port, args.duration, run))
    kind = ("persistent " if args.persistent else "") + ("durable " if args.durable else "")
    ack = "auto-ack" if args.auto_ack else "manual ack"
    print(f"server CPU per {kind}AMQP message ({args.size} B, {ack}), "
          f"{args.duration:g} s of load a run, "
          f"{args.repeat} runs:")
    print_runs(results, paired=len(chosen) == 2)
    if args.profile:
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
