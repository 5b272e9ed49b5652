"""The disk store: one ``QueueStore`` per durable queue, and group commit for them all.

Appends and acks are buffered in memory. Once per event-loop iteration (``flush``) every
dirty queue writes its buffers with one ``pwrite`` per file; then one fsync pass over the
files written runs on a writer thread while the loop keeps serving. Callbacks waiting for
durability (publisher confirms) run after the fsync that covers them. ``fsync`` modes:

* ``always``   -- fsync after every batch; confirms wait for it (the default);
* ``interval`` -- fsync every ``interval_ms``; confirms wait for the next one;
* ``never``    -- no fsync at all; confirms follow the write (unsafe, for benchmarks).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from roost.store.delayed import DelayedLog
from roost.store.files import FilePool
from roost.store.paths import delayed_dir, queue_dir
from roost.store.queue_store import QueueStore, _fsync_dir

log = logging.getLogger("roost.store")

FSYNC_MODES = ("always", "interval", "never")
# upper bounds (seconds) of the fsync latency histogram, Prometheus style
FSYNC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)

Waiter = Callable[[bool], None]


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


class DiskStore:
    def __init__(
        self,
        data_dir: Path,
        *,
        fsync: str = "always",
        interval_ms: int = 200,
        segment_size: int = 8 * 1024 * 1024,
        ack_compact_bytes: int = 1024 * 1024,
        max_open: int = 256,
    ) -> None:
        if fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_MODES)}")
        self.data_dir = data_dir
        self.mode = fsync
        self.interval = interval_ms / 1000
        self.segment_size = segment_size
        self.ack_compact_bytes = ack_compact_bytes
        self.files = FilePool(max_open)
        self.bytes_on_disk = 0
        self.segment_count = 0
        self.fsync_stats = FsyncStats()
        self.appends = 0  # bumped by every dirty(); the broker compares it around a publish
        self.before_flush: list[Callable[[], None]] = []  # e.g. save definitions when dirty
        self._dirty: set[QueueStore] = set()
        self._opened: set[Path] = set()
        self._new_dirs: set[Path] = set()
        self._unsynced: set[Path] = set()
        self._waiters: list[Waiter] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_scheduled = False
        self._syncing = False
        self._closed = False
        self._executor: ThreadPoolExecutor | None = None
        self._interval_handle: asyncio.TimerHandle | None = None

    # -- queues -----------------------------------------------------------------------

    def open_queue(self, vhost: str, name: str) -> QueueStore:
        directory = queue_dir(self.data_dir, vhost, name)
        self._opened.add(directory)
        return QueueStore(self, directory, f"{vhost}/{name}")

    def open_delayed(self, vhost: str, exchange: str) -> DelayedLog:
        directory = delayed_dir(self.data_dir, vhost, exchange)
        self._opened.add(directory)
        return DelayedLog(QueueStore(self, directory, f"{vhost}/delayed:{exchange}"))

    def remove_orphans(self) -> int:
        """After recovery: delete queue (and delayed-exchange) directories that nothing
        durable claimed (declared and fed, then a crash before the definition was saved)."""
        removed = 0
        for pattern in ("vhosts/*/queues/*", "vhosts/*/delayed/*"):
            for directory in self.data_dir.glob(pattern):
                if directory.is_dir() and directory not in self._opened:
                    log.warning("store: %s belongs to nothing durable, removed", directory)
                    shutil.rmtree(directory, ignore_errors=True)
                    removed += 1
        return removed

    def new_segment(self, store: QueueStore) -> None:
        if not store.dir_made:
            store.dir.mkdir(parents=True, exist_ok=True)
            store.dir_made = True
            self._new_dirs.add(store.dir.parent)
        self._new_dirs.add(store.dir)
        self.segment_count += 1

    def bytes_changed(self, delta: int) -> None:
        self.bytes_on_disk += delta

    # -- group commit -----------------------------------------------------------------

    def dirty(self, store: QueueStore) -> None:
        self._dirty.add(store)
        self.appends += 1
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def when_durable(self, waiter: Waiter) -> None:
        """Call ``waiter(True)`` once everything buffered so far is on disk."""
        self._waiters.append(waiter)
        if self._loop is None:
            return
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    @property
    def has_waiters(self) -> bool:
        return bool(self._waiters)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="roost-fsync")
        if self.mode == "interval":
            self._interval_handle = loop.call_later(self.interval, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        self._interval_handle = self._loop.call_later(self.interval, self._tick)
        self._write()
        self._start_sync()

    def flush(self) -> None:
        self._flush_scheduled = False
        if self._closed:
            return
        self._write()
        if self.mode == "always":
            self._start_sync()
        elif self.mode == "never":
            self._settle(self._take_waiters(), True)

    def _write(self) -> None:
        for hook in self.before_flush:
            hook()
        dirty, self._dirty = self._dirty, set()
        failed = False
        for store in dirty:
            if store.deleted:
                continue
            try:
                self._unsynced.update(store.write_pending())
            except OSError as exc:
                failed = True
                log.error("store %s: write failed: %s", store.label, exc)
        if failed:
            self._settle(self._take_waiters(), False)

    def _take_waiters(self) -> list[Waiter]:
        waiters, self._waiters = self._waiters, []
        return waiters

    def _start_sync(self) -> None:
        if self._syncing or not (self._unsynced or self._waiters or self._new_dirs):
            return
        assert self._loop is not None and self._executor is not None
        paths, self._unsynced = self._unsynced, set()
        dirs, self._new_dirs = self._new_dirs, set()
        waiters = self._take_waiters()
        self._syncing = True
        future = self._loop.run_in_executor(self._executor, _sync, paths, dirs)

        def done(fut: asyncio.Future[float]) -> None:
            self._syncing = False
            exc = fut.exception()
            if exc is not None:
                log.error("store: fsync failed: %s", exc)
            else:
                self.fsync_stats.observe(fut.result())
            self._settle(waiters, exc is None)
            if self._waiters or (self.mode == "always" and (self._unsynced or self._dirty)):
                self.flush()

        future.add_done_callback(done)

    @staticmethod
    def _settle(waiters: list[Waiter], ok: bool) -> None:
        for waiter in waiters:
            try:
                waiter(ok)
            except Exception:  # a closed channel must not stop the others' confirms
                log.exception("store: durability callback failed")

    def sync_now(self) -> None:
        """Write and fsync everything now, on this thread (tests, shutdown)."""
        self._write()
        paths, self._unsynced = self._unsynced, set()
        dirs, self._new_dirs = self._new_dirs, set()
        if self.mode != "never":
            self.fsync_stats.observe(_sync(paths, dirs))
        self._settle(self._take_waiters(), True)

    async def close(self) -> None:
        """Finish what is in flight, write and sync the rest, close every file."""
        if self._interval_handle is not None:
            self._interval_handle.cancel()
        while self._syncing:
            await asyncio.sleep(0.005)
        self.sync_now()
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self.files.close_all()


def _sync(paths: set[Path], dirs: set[Path]) -> float:
    """fsync each file through a descriptor of its own: Linux syncs the file (the inode)
    whatever descriptor wrote it, and the pool may close its descriptors meanwhile."""
    started = time.perf_counter()
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # deleted since (a consumed segment): nothing to make durable
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for directory in dirs:
        if directory.is_dir():
            _fsync_dir(directory)
    return time.perf_counter() - started
