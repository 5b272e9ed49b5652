"""What a durable queue's ack log costs at each group commit, in the two shapes that once
made it slow: a deep backlog drained from the head, and one message held unacked at the
head while everything behind it is consumed (a long Celery task with prefetch).

    .venv/bin/python bench/ack_log_bench.py [--backlog 2000000] [--passed 200000]

Drives one ``QueueStore`` directly (``--fsync never``: the fsync is not what is measured),
100 messages delivered and acked per commit, and prints a Markdown table: the median and
worst time of a commit's ``write_pending`` (writes plus any ack-log rewrite), and the ack
log's size at the end.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from roost.store.hub import DiskStore
from roost.store.queue_store import QueueStore

PROPS = (None,) * 14
PER_COMMIT = 100


def _commits(store: QueueStore, seqs: Iterator[list[int]]) -> list[float]:
    """Deliver and ack each list of seqs, then write: the seconds each write took."""
    written: set[Path] = set()
    times = []
    for batch in seqs:
        for seq in batch:
            store.mark_delivered(seq)
        for seq in batch:
            store.remove(seq)
        start = time.perf_counter()
        store.write_pending(written)
        times.append(time.perf_counter() - start)
    return times


def backlog(tmp: Path, depth: int, acked: int) -> tuple[list[float], int]:
    store = DiskStore(tmp, fsync="never").open_queue("/", "backlog")
    written: set[Path] = set()
    for i in range(depth):
        store.append("", "q", PROPS, b"x" * 16)
        if i % 100_000 == 0:
            store.write_pending(written)
    store.write_pending(written)
    batches = (list(range(s, s + PER_COMMIT)) for s in range(1, acked + 1, PER_COMMIT))
    return _commits(store, batches), store._ack_size


def held_head(tmp: Path, passed: int) -> tuple[list[float], int]:
    store = DiskStore(tmp, fsync="never").open_queue("/", "held")
    store.mark_delivered(store.append("", "q", PROPS, b"held"))

    def batches() -> Iterator[list[int]]:
        for _ in range(passed // PER_COMMIT):
            yield [store.append("", "q", PROPS, b"x" * 16) for _ in range(PER_COMMIT)]

    return _commits(store, batches()), store._ack_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=2_000_000, help="messages queued")
    parser.add_argument("--passed", type=int, default=200_000, help="messages acked")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-acks-") as tmp:
        times, size = backlog(Path(tmp) / "a", args.backlog, args.passed)
        rows.append((f"{args.backlog:,} queued, {args.passed:,} acked from the head", times, size))
        times, size = held_head(Path(tmp) / "b", args.passed)
        rows.append((f"1 held at the head, {args.passed:,} acked behind it", times, size))
    print("| scenario | commits | median ms | worst ms | ack log bytes at the end |")
    print("|---|---|---|---|---|")
    for name, times, size in rows:
        median, worst = statistics.median(times) * 1000, max(times) * 1000
        print(f"| {name} | {len(times):,} | {median:.2f} | {worst:.1f} | {size:,} |")


if __name__ == "__main__":
    main()
