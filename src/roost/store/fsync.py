"""The fsync pass of the disk store's group commit, and its latency histogram."""

from __future__ import annotations

import bisect
import contextlib
import time
from pathlib import Path

from roost.store.files import fsync_path

# upper bounds (seconds) of the fsync latency histogram, Prometheus style
FSYNC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class FsyncStats:
    def __init__(self) -> None:
        self.bounds: tuple[float, ...] = FSYNC_BUCKETS
        self.counts: list[int] = [0] * (len(FSYNC_BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(FSYNC_BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1


def sync_files(paths: set[Path], dirs: set[Path]) -> float:
    """fsync each file through a descriptor of its own: Linux syncs the file (the inode)
    whatever descriptor wrote it, and the pool may close its descriptors meanwhile."""
    started = time.perf_counter()
    for path in paths:
        # deleted since (a consumed segment): nothing to make durable
        with contextlib.suppress(FileNotFoundError):
            fsync_path(path)
    for directory in dirs:
        if directory.is_dir():
            fsync_path(directory)
    return time.perf_counter() - started
