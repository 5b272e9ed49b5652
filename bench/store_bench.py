"""Durable store figures: confirmed persistent publish rate per ``--fsync`` mode (and
RabbitMQ's, when installed), and recovery time for a backlog of N messages.

    .venv/bin/python bench/store_bench.py [--repeat 3] [--duration 10]
        [--recover 100000] [--brokers roost,rabbitmq]

Publish scenario (the issue's): 1 producer / 1 consumer, persistent 1 KiB messages to a
durable queue, publisher confirms (window 1000), manual ack with prefetch 100. The table
shows medians of ``--repeat`` runs. Recovery: publish N persistent 1 KiB messages with no
consumer, SIGKILL the server, start it again and read its "recovered ..." log line.
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package
from amqp_throughput import Scenario, perf

PUBLISH = Scenario(
    "store",
    "1 producer / 1 consumer, persistent 1 KiB, durable queue, confirms 1000, prefetch 100",
    ("--producers", "1", "--consumers", "1", "--size", "1024", "--persistent",
     "--confirm", "1000", "--durable-queue", "--prefetch", "100"),
)
RECOVERED = re.compile(r"recovered (\d+) messages in (\d+) queues in ([0-9.]+) s")


def publish_rates(url: str, repeat: int, duration: float, log: object) -> str:
    """Median confirmed publish rate / median consume rate over ``repeat`` runs."""
    runs = [perf(url, PUBLISH, duration, "store-bench", log) for _ in range(repeat)]
    pub = statistics.median(float(r["publish_rate"]) for r in runs)
    con = statistics.median(float(r["consume_rate"]) for r in runs)
    return f"{pub:,.0f} / {con:,.0f}"


def _start(data: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "roost", "server", "--amqp-port", str(port),
           "--http-port", "0", "--data-dir", str(data)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    _brokers._wait_for_port(port, proc, 120, log)
    return proc


def recovery_seconds(count: int) -> tuple[int, float]:
    import pika

    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        data, log = Path(tmp) / "data", Path(tmp) / "server.log"
        port = _brokers.free_port()
        proc = _start(data, port, log)
        try:
            conn = pika.BlockingConnection(
                pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{port}/%2F"))
            ch = conn.channel()
            ch.queue_declare("recover", durable=True)
            props = pika.BasicProperties(delivery_mode=2)
            body = b"x" * 1024
            for _ in range(count):
                ch.basic_publish("", "recover", body, props)
            ch.confirm_delivery()
            ch.basic_publish("", "recover", body, props)  # acked after the last fsync
            conn.close()
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        log.write_text("")
        proc = _start(data, port, log)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                found = RECOVERED.search(log.read_text())
                if found:
                    return int(found[1]), float(found[3])
                time.sleep(0.1)
            raise RuntimeError("no recovery line in the log")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def backlog(count: int, size: int = 1024) -> list[tuple[str, str]]:
    """Publish ``count`` persistent ``size``-byte messages with no consumer; RSS (idle, then
    with the backlog, and per message), publish rate, restart (recovery) time with that
    backlog, RSS after it, then the drain rate."""
    import pika

    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="store-backlog-") as tmp:
        data, log = Path(tmp) / "data", Path(tmp) / "server.log"
        port = _brokers.free_port()
        url = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
        proc = _start(data, port, log)
        try:
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            ch.queue_declare("backlog", durable=True)
            idle = _rss_mb(proc.pid)
            props = pika.BasicProperties(delivery_mode=2)
            body = b"x" * size
            started = time.monotonic()
            for _ in range(count):
                ch.basic_publish("", "backlog", body, props)
            ch.confirm_delivery()
            ch.basic_publish("", "backlog", body, props)
            rate = count / (time.monotonic() - started)
            conn.close()
            rows.append((f"backlog {count:,}: publish msg/s (no confirms, then one)",
                         f"{rate:,.0f}"))
            rss = _rss_mb(proc.pid)
            rows.append((f"backlog {count:,} x {size} B: server RSS (idle before: {idle:,.0f} MB)",
                         f"{rss:,.0f} MB"))
            rows.append((f"backlog {count:,}: RSS per queued message",
                         f"{(rss - idle) * 2**20 / (count + 1):,.1f} B"))
            disk = sum(f.stat().st_size for f in data.rglob("*.seg"))
            rows.append((f"backlog {count:,}: disk bytes per message beyond the {size} B body",
                         f"{disk / (count + 1) - size:,.0f}"))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        started = time.monotonic()
        proc = _start(data, port, log)
        try:
            rows.append((f"backlog {count:,}: restart until listening",
                         f"{time.monotonic() - started:.1f} s"))
            rss = _rss_mb(proc.pid)
            rows.append((f"backlog {count:,}: RSS after restart", f"{rss:,.0f} MB"))
            rows.append((f"backlog {count:,}: RSS per message after restart (over idle)",
                         f"{(rss - idle) * 2**20 / (count + 1):,.1f} B"))
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            ch.basic_qos(prefetch_count=100)
            started = time.monotonic()
            stream = ch.consume("backlog", inactivity_timeout=10)
            for n, (method, _props, _body) in enumerate(stream, start=1):
                if method is None:
                    raise RuntimeError(f"drain stalled after {n} messages")
                if n % 50 == 0 or n == count + 1:
                    ch.basic_ack(method.delivery_tag, multiple=True)
                if n == count + 1:
                    break
            rows.append((f"backlog {count:,}: drain msg/s, 1 consumer, prefetch 100",
                         f"{(count + 1) / (time.monotonic() - started):,.0f}"))
            conn.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--recover", type=int, default=100_000, help="backlog for recovery")
    parser.add_argument("--brokers", default="roost,rabbitmq")
    parser.add_argument("--backlog", type=int, default=0,
                        help="also measure a backlog of N messages (the issue asks 1M, 10M)")
    parser.add_argument("--only-backlog", action="store_true")
    parser.add_argument("--body-size", type=int, default=1024, help="backlog message size")
    args = parser.parse_args(argv)
    rows: list[tuple[str, str]] = []
    log = sys.stderr
    if args.only_backlog:
        _print(backlog(args.backlog, args.body_size))
        return 0
    what = f"publish (confirmed) / consume msg/s, median of {args.repeat}"
    for mode, extra in (("always", ()), ("interval", ("--fsync-interval-ms", "20")),
                        ("never", ())):
        with _brokers.roost("--fsync", mode, *extra) as url:
            rates = publish_rates(url, args.repeat, args.duration, log)
        rows.append((f"Roost --fsync {' '.join((mode, *extra))}: {what}", rates))
    if "rabbitmq" in args.brokers and _brokers.rabbitmq_installed():
        with _brokers.rabbitmq() as url:
            rates = publish_rates(url, args.repeat, args.duration, log)
        rows.append((f"RabbitMQ: {what}", rates))
    times = [recovery_seconds(args.recover) for _ in range(args.repeat)]
    rows.append((f"Roost recovery of {times[0][0]:,} x 1 KiB (median of {args.repeat})",
                 f"{statistics.median(t for _, t in times):.2f} s"))
    if args.backlog:
        rows += backlog(args.backlog, args.body_size)
    print(f"\n{PUBLISH.title}\n")
    _print(rows)
    return 0


def _print(rows: list[tuple[str, str]]) -> None:
    print("| measurement | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    sys.exit(main())
