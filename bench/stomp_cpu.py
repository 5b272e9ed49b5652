"""Roost's server CPU time per STOMP message, for tuning on a shared machine.

    .venv/bin/python bench/stomp_cpu.py [--count 20000] [--repeat 3] [--profile FILE]

The scenario of bench/stomp_throughput.py (1 producer / 1 consumer over TCP, 1 KiB,
client-individual ACKs, prefetch 100), but what it reports is the server process's
user + system CPU time (``/proc/PID/stat``) per message delivered and acknowledged:
SEND parse, routing, MESSAGE encoding, ACK. Unlike messages per second it hardly moves
when other work shares the cores. ``--profile FILE`` runs the server under cProfile
(much slower; only the call shares mean anything) and prints its top functions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package
import stomp_throughput

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", metavar="FILE", help="cProfile the server into FILE")
    args = ap.parse_args()
    port = _brokers.free_port()
    with tempfile.TemporaryDirectory(prefix="bench-roost-cpu-") as tmp:
        profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        cmd = [sys.executable, *profile, "-m", "roost", "server", "--amqp-port", "0",
               "--http-port", "0", "--ws-port", "0", "--stomp-port", str(port),
               "--data-dir", str(Path(tmp) / "data"), "--log-level", "warning"]
        log = Path(tmp) / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            _brokers._wait_for_port(port, proc, 30, log)
            asyncio.run(stomp_throughput.run_once(port, 2000))  # warm-up
            per_message = []
            for _ in range(args.repeat):
                before = cpu_seconds(proc.pid)
                asyncio.run(stomp_throughput.run_once(port, args.count))
                time.sleep(0.2)  # the last ACKs reach the server
                per_message.append((cpu_seconds(proc.pid) - before) / args.count * 1e6)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    runs = ", ".join(f"{v:.1f}" for v in per_message)
    print(f"server CPU per message: median {statistics.median(per_message):.1f} µs "
          f"({runs}; {args.count} messages a run)")
    if args.profile:
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
