"""What the benchmarks read from a broker process: its CPU time and resident memory
(from /proc), and which process that is for a broker started by ``_brokers``."""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from roost._build import PURE_ENV

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far: fields 14 and 15 of
    /proc/PID/stat, counted after the command name (which may hold spaces or ')')."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    return sum(cpu_times(pid))


def io_calls(pid: int) -> tuple[int, int]:
    """(read, write) system calls a process made so far (``syscr``, ``syscw`` of
    /proc/PID/io): socket reads and writes included, epoll waits not."""
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["syscr"]), int(fields["syscw"])


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident set size (VmRSS), or its peak so far with ``field="VmHWM"``, MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def listener_pid(port: int) -> int:
    """The pid whose socket listens on 127.0.0.1:``port`` (from /proc/net/tcp)."""
    inode = ""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        if state == "0A" and int(local.split(":")[1], 16) == port:
            inode = fields[9]
            break
    if not inode:
        raise RuntimeError(f"nothing listens on port {port}")
    target = f"socket:[{inode}]"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if fd.readlink().as_posix() == target:
                    return int(proc.name)
        except OSError:
            continue
    raise RuntimeError(f"no process owns the listener on port {port}")


def broker_pid(url: str) -> int:
    """The broker process behind an AMQP URL a launcher yielded (beam.smp for RabbitMQ)."""
    return listener_pid(int(url.rsplit(":", 1)[1].split("/")[0]))


def print_runs(results: dict[str, list[Any]], *, paired: bool) -> None:
    """Each tree's runs (``cpu``/``user`` µs a message, ``reads``/``writes`` system calls a
    message): medians, and with ``paired`` the median of the per-run ratios of the first
    tree to the second (runs alternate, so each pair shared the box's state), of all CPU
    and of user time alone (the system part moves with how often a server wakes, which
    the load sets as much as the code)."""
    for name, got in results.items():
        runs = ", ".join(f"{r.cpu:.1f}" for r in got)
        print(
            f"  {name}: median {statistics.median(r.cpu for r in got):.1f} µs "
            f"(user {statistics.median(r.user for r in got):.1f}; runs {runs}); "
            f"reads/msg {statistics.median(r.reads for r in got):.3f}, "
            f"writes/msg {statistics.median(r.writes for r in got):.3f}"
        )
    if paired:
        this, other = results.values()
        ratios = [a.cpu / b.cpu for a, b in zip(this, other, strict=True)]
        users = [a.user / b.user for a, b in zip(this, other, strict=True)]
        print(
            f"  paired ratio this/other: median {statistics.median(ratios):.3f} "
            f"(lower in {sum(r < 1 for r in ratios)} of {len(ratios)}); user time alone "
            f"{statistics.median(users):.3f} (lower in {sum(r < 1 for r in users)})"
        )


def add_tree_options(ap: argparse.ArgumentParser) -> None:
    """``--against SRC`` and ``--against-pure``: the second server a CPU bench alternates
    with this checkout's."""
    ap.add_argument("--against", metavar="SRC", help="also a server from this src directory")
    ap.add_argument("--against-pure", action="store_true",
                    help="also this checkout's pure-Python build (compiled ÷ pure, paired)")


def trees(args: argparse.Namespace) -> dict[str, tuple[str | None, bool]]:
    """The servers to alternate, by name: (source tree or None for this checkout, pure)."""
    chosen: dict[str, tuple[str | None, bool]] = {"this checkout": (None, False)}
    if args.against:
        chosen[args.against] = (args.against, False)
    elif args.against_pure:
        chosen["this checkout, pure Python"] = (None, True)
    return chosen


def server_env(src: str | None, pure: bool) -> dict[str, str]:
    """A server's environment: ``src`` first on its path, the pure build with ``pure``."""
    env = {**os.environ, "PYTHONPATH": src} if src else dict(os.environ)
    if pure:
        env[PURE_ENV] = "1"
    return env
