"""Durable store figures: confirmed persistent publish rate per ``--fsync`` mode (and
RabbitMQ's, when installed), recovery time for a backlog of N messages, and a backlog
run (RSS, publish rate, disk footprint, restart, drain) at one or more sizes.

    .venv/bin/python bench/store_bench.py [--repeat 3] [--duration 10]
        [--recover 100000] [--brokers roost,rabbitmq] [--backlog 1000000,10000000]
    .venv/bin/python bench/store_bench.py --only-backlog --backlog 1000000,10000000

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
import _brokers  # sibling modules, not a package
from _measure import rss_mb
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


def _start(data: Path, port: int, log: Path, timeout: float = 120) -> subprocess.Popen[bytes]:
    # STOMP and Web-STOMP on free ports too: their defaults may be taken
    cmd = [sys.executable, "-m", "roost", "server", "--amqp-port", str(port),
           "--http-port", "0", "--stomp-port", "0", "--ws-port", "0", "--prometheus-port", "0",
           "--mqtt-port", "0", "--mqtt-ws-port", "0", "--stream-port", "0",
           "--data-dir", str(data)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        _brokers._wait_for_port(port, proc, timeout, log)
    except BaseException:
        proc.kill()  # not left recovering a data dir that is about to be removed
        proc.wait()
        raise
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


def _disk(directory: Path) -> int:
    """Bytes of every file under ``directory`` (segments, ack log, owner note)."""
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


class _Rows(list[tuple[str, str]]):
    """Rows that also go to stderr as they are measured: a 10 M run takes half an hour,
    and a failure late in it should not lose what came before."""

    def append(self, row: tuple[str, str], /) -> None:
        print(f"store-bench: {row[0]}: {row[1]}", file=sys.stderr, flush=True)
        super().append(row)


def backlog(points: list[int], size: int = 1024) -> list[tuple[str, str]]:
    """Publish persistent ``size``-byte messages with no consumer up to each of ``points``
    (say 1,000,000 then 10,000,000), reporting the server's RSS and the publish rate at
    each; the disk bytes per message beyond the body (every file of the queue, ack log
    included); then restart with the whole backlog (time until listening, the recovery
    line's own figure, RSS after), and the drain rate of one consumer."""
    import pika

    rows = _Rows()
    with tempfile.TemporaryDirectory(prefix="store-backlog-") as tmp:
        data, log = Path(tmp) / "data", Path(tmp) / "server.log"
        port = _brokers.free_port()
        url = f"amqp://guest:guest@127.0.0.1:{port}/%2F"
        proc = _start(data, port, log)
        try:
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            ch.queue_declare("backlog", durable=True)
            idle = rss_mb(proc.pid)
            rows.append(("server RSS before publishing (idle)", f"{idle:,.0f} MB"))
            props = pika.BasicProperties(delivery_mode=2)
            body = b"x" * size
            confirm = conn.channel()
            confirm.confirm_delivery()
            started = time.monotonic()
            published = 0
            for point in points:
                for _ in range(point - published - 1):
                    ch.basic_publish("", "backlog", body, props)
                # the last one confirmed: everything before it is on disk (group commit)
                confirm.basic_publish("", "backlog", body, props)
                published = point
                elapsed = time.monotonic() - started
                rss = rss_mb(proc.pid)
                rows.append((f"{point:,} queued x {size} B: publish msg/s (no confirms but "
                             "a last one)", f"{published / elapsed:,.0f}"))
                rows.append((f"{point:,} queued: server RSS", f"{rss:,.0f} MB"))
                rows.append((f"{point:,} queued: RSS per message over idle",
                             f"{(rss - idle) * 2**20 / published:,.1f} B"))
                queue_dir = data / "vhosts"
                rows.append((f"{point:,} queued: disk bytes per message beyond the {size} B "
                             "body (all the queue's files)",
                             f"{_disk(queue_dir) / published - size:,.1f}"))
            conn.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(600)
        log.write_text("")
        started = time.monotonic()
        # recovery reads every record: 10 M took 61 s on one box and over 120 s on another
        proc = _start(data, port, log, timeout=3600)
        try:
            rows.append((f"restart with {published:,} queued: until listening",
                         f"{time.monotonic() - started:.1f} s"))
            found = RECOVERED.search(log.read_text())
            if found:
                rows.append((f"restart with {published:,} queued: recovery (its log line)",
                             f"{float(found[3]):.1f} s"))
            rss = rss_mb(proc.pid)
            rows.append((f"restart with {published:,} queued: RSS after", f"{rss:,.0f} MB"))
            peak = rss_mb(proc.pid, "VmHWM")
            rows.append((f"restart with {published:,} queued: peak RSS (recovery included)",
                         f"{peak:,.0f} MB"))
            conn = pika.BlockingConnection(pika.URLParameters(url))
            ch = conn.channel()
            ch.basic_qos(prefetch_count=100)
            started = time.monotonic()
            stream = ch.consume("backlog", inactivity_timeout=10)
            for n, (method, _props, _body) in enumerate(stream, start=1):
                if method is None:
                    raise RuntimeError(f"drain stalled after {n} messages")
                if n % 50 == 0 or n == published:
                    ch.basic_ack(method.delivery_tag, multiple=True)
                if n == published:
                    break
            rows.append((f"drain {published:,}: msg/s, 1 consumer, prefetch 100, acks per 50",
                         f"{published / (time.monotonic() - started):,.0f}"))
            ch.cancel()
            ch.queue_declare("backlog", passive=True)  # a round trip: the acks are in
            conn.close()
            rows.append(("disk left after the drain (all the queue's files)",
                         f"{_disk(data / 'vhosts'):,} B"))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(600)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--recover", type=int, default=100_000, help="backlog for recovery")
    parser.add_argument("--brokers", default="roost,rabbitmq")
    parser.add_argument("--backlog", type=_counts, default=[],
                        help="also measure a backlog: N, or N1,N2,... measured at each point "
                             "of one run (the issue asks 1000000,10000000)")
    parser.add_argument("--only-backlog", action="store_true")
    parser.add_argument("--body-size", type=int, default=1024, help="backlog message size")
    args = parser.parse_args(argv)
    rows: list[tuple[str, str]] = []
    log = sys.stderr
    if args.only_backlog:
        if not args.backlog:
            parser.error("--only-backlog needs --backlog N[,N2,...]")
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


def _counts(text: str) -> list[int]:
    points = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    if not points or points[0] <= 0 or points != sorted(set(points)):
        raise argparse.ArgumentTypeError("counts in increasing order, e.g. 1000000,10000000")
    return points


def _print(rows: list[tuple[str, str]]) -> None:
    print("| measurement | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    sys.exit(main())
