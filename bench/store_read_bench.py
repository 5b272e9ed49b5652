"""What reading a paged-out message back from a durable queue's segments costs: the
store's side of every delivery from a backlog larger than the in-memory window.

    .venv/bin/python bench/store_read_bench.py [--messages 100000] [--size 1024] [--repeat 5]

One ``QueueStore`` (no server), ``--messages`` records written and synced, then each read
back once by its sequence number, ``--repeat`` times; prints a Markdown table with the
best pass's microseconds per read (best, not median: a pass is a tight loop, and the
slow passes are the box's noise).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from roost.store.hub import DiskStore

PROPS = (None,) * 14


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024, help="body bytes")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-reads-") as tmp:
        hub = DiskStore(Path(tmp), fsync="never")
        store = hub.open_queue("/", "reads")
        body = b"x" * args.size
        seqs = [store.append("", "q", PROPS, body) for _ in range(args.messages)]
        hub.sync_now()  # every record on disk: each read is a pread, as for a paged entry
        best = float("inf")
        for _ in range(args.repeat):
            started = time.perf_counter()
            for seq in seqs:
                store.read(seq)
            best = min(best, time.perf_counter() - started)
        hub.files.close_all()
    print("| records | body bytes | µs per read (best of", args.repeat, "passes) |")
    print("|---|---|---|")
    print(f"| {args.messages:,} | {args.size:,} | {best / args.messages * 1e6:.2f} |")


if __name__ == "__main__":
    main()
