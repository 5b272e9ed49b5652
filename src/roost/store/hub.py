"""The disk store: one ``QueueStore`` per durable queue, and group commit for them all.

Appends and acks are buffered in memory. Once per event-loop iteration (``flush``) every
dirty queue writes its buffers with one ``pwrite`` per file; then one fsync pass over the
files written runs on a writer thread while the loop keeps serving. Callbacks waiting for
durability (publisher confirms) run after the fsync that covers them. ``fsync`` modes:

* ``always``   -- fsync after every batch; confirms wait for it (the default);
* ``interval`` -- fsync every ``interval_ms``; confirms wait for the next one;
* ``never``    -- no fsync at all; confirms follow the write (unsafe, for benchmarks).

A write that fails for lack of space (ENOSPC, EDQUOT) loses nothing: what was not
written stays buffered and is written again every ``retry_interval`` seconds; callbacks
waiting for durability wait with it (they are told ``False`` only if the store closes
first), and ``on_full(True)`` / ``on_full(False)`` tell the server so it can raise and
clear the disk alarm, which stops publishers. Any other write or fsync error settles the
waiting callbacks with ``False`` (publisher nacks).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from roost.store.delayed import DelayedLog
from roost.store.files import NO_SPACE, FilePool, lock_directory
from roost.store.fsync import FsyncStats, sync_files
from roost.store.member_copies import GuestStore, MemberCopies
from roost.store.member_log import MEMBER_FILE
from roost.store.orphans import quarantine_orphans
from roost.store.paths import delayed_dir, queue_dir
from roost.store.queue_store import QueueStore

log = logging.getLogger("roost.store")

SPILL_DIR = "paged"  # under the data dir: transient messages paged out (core.paging)

FSYNC_MODES = ("always", "interval", "never")
MAX_READERS = 32  # queue stores that keep a read-ahead buffer (queue_store.READ_AHEAD)
Waiter = Callable[[bool], None]


class DiskStore(MemberCopies):
    def __init__(
        self,
        data_dir: Path,
        *,
        fsync: str = "always",
        interval_ms: int = 200,
        segment_size: int = 8 * 1024 * 1024,
        ack_compact_bytes: int = 1024 * 1024,
        max_open: int = 256,
        idle_close: float = 30.0,
        exclusive: bool = False,
        on_full: Callable[[bool], None] | None = None,
        retry_interval: float = 1.0,
    ) -> None:
        """``on_full(True)`` when a write fails for lack of space, ``on_full(False)`` when
        one succeeds again (the server raises and clears the disk alarm); failed writes
        are retried every ``retry_interval`` seconds."""
        if fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_MODES)}")
        # a server locks its data dir before touching anything in it (the spill cleanup
        # below included); tests that open one store twice in a process do not
        self._lock_fd = lock_directory(data_dir) if exclusive else -1
        self.data_dir = data_dir
        self.mode = fsync
        self.interval = interval_ms / 1000
        self.segment_size = segment_size
        self.ack_compact_bytes = ack_compact_bytes
        self.files = FilePool(max_open)
        self.idle_close = idle_close  # seconds: descriptors idle this long (to 2x) close
        self._idle_handle: asyncio.TimerHandle | None = None
        self.bytes_on_disk = 0
        self.segment_count = 0
        self.fsync_stats = FsyncStats()
        self.appends = 0  # bumped by every dirty(); the broker compares it around a publish
        self.before_flush: list[Callable[[], None]] = []  # e.g. save definitions when dirty
        self._dirty: set[QueueStore] = set()
        self._opened: set[Path] = set()
        self._new_dirs: set[Path] = set()
        shutil.rmtree(data_dir / SPILL_DIR, ignore_errors=True)  # a previous run's paging
        self._unsynced: set[Path] = set()
        self._waiters: list[Waiter] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_scheduled = False
        self._syncing = False
        self._closed = False
        self._executor: ThreadPoolExecutor | None = None
        self._interval_handle: asyncio.TimerHandle | None = None
        # stores whose last write failed, written again after retry_interval seconds
        self._failed: set[QueueStore] = set()
        # the stores holding a read-ahead buffer, least recently refilled first: at most
        # MAX_READERS of them keep theirs (a buffer each for 10,000 queues draining at
        # once would be 640 MB)
        self._readers: dict[QueueStore, None] = {}
        self._retry_handle: asyncio.TimerHandle | None = None
        self.retry_interval = retry_interval
        self.full = False  # the last write failed for lack of space
        self.on_full = on_full

    # -- queues -----------------------------------------------------------------------

    def open_queue(self, vhost: str, name: str) -> QueueStore:
        """A durable queue's store; a guest where its directory holds a quorum member's
        copy (``member_copies.py``: it recovers and deletes nothing of the copy)."""
        return self._open_dir(vhost, name, guest=True)

    def _open_dir(self, vhost: str, name: str, *, guest: bool = False) -> QueueStore:
        directory = queue_dir(self.data_dir, vhost, name)
        self._opened.add(directory)
        owner = {"kind": "queue", "vhost": vhost, "name": name}
        kind = GuestStore if guest and (directory / MEMBER_FILE).exists() else QueueStore
        return kind(self, directory, f"{vhost}/{name}", owner)

    def open_spill(self, vhost: str, name: str) -> QueueStore:
        """A store for a queue's transient messages paged out under memory pressure (a
        queue that has no store of its own). Spill files never outlive the process."""
        directory = queue_dir(self.data_dir / SPILL_DIR, vhost, name)
        return QueueStore(self, directory, f"{vhost}/{name} (paged)")

    def open_delayed(self, vhost: str, exchange: str) -> DelayedLog:
        directory = delayed_dir(self.data_dir, vhost, exchange)
        self._opened.add(directory)
        owner = {"kind": "x-delayed-message exchange", "vhost": vhost, "name": exchange}
        return DelayedLog(QueueStore(self, directory, f"{vhost}/delayed:{exchange}", owner))

    def quarantine_orphans(self) -> list[Path]:
        """After recovery: queue (and delayed-exchange) directories that nothing durable
        claimed moved aside (``store/orphans.py``)."""
        return quarantine_orphans(self.data_dir, self._opened)

    def new_segment(self, store: QueueStore) -> None:
        # the directory is made by the first write_pending (a mkdir may fail: disk full);
        # for a power cut, every entry on the way down to it must be synced too (data/vhosts,
        # vhosts/<vhost>, <vhost>/queues, queues/<queue>), so each parent is fsynced once
        if not store.dir_made:
            parent = store.dir.parent
            while parent != self.data_dir and self.data_dir in parent.parents:
                self._new_dirs.add(parent)
                parent = parent.parent
            self._new_dirs.add(self.data_dir)
        self._new_dirs.add(store.dir)
        self.segment_count += 1

    def read_ahead(self, store: QueueStore) -> None:
        """``store`` refilled its read-ahead buffer: drop the oldest one past the limit."""
        readers = self._readers
        readers.pop(store, None)
        readers[store] = None
        if len(readers) > MAX_READERS:
            oldest = next(iter(readers))
            del readers[oldest]
            oldest.drop_ahead()

    def not_reading(self, store: QueueStore) -> None:
        self._readers.pop(store, None)

    def bytes_changed(self, delta: int) -> None:
        self.bytes_on_disk += delta

    # -- group commit -----------------------------------------------------------------

    def changed(self) -> None:
        """Something the next group commit writes changed: ``appends`` moves, so that
        whoever compares it around an operation waits for that commit's fsync. Called
        as is for a definition (a ``before_flush`` hook writes it), and by ``dirty`` and
        ``file_written``."""
        self.appends += 1
        if not self._flush_scheduled:
            self._schedule_flush()

    def dirty(self, store: QueueStore) -> None:
        self._dirty.add(store)
        self.changed()

    def file_written(self, path: Path) -> None:
        """A file written outside the queue stores (a stream's log or stored offsets)
        joins the next group commit: fsync'ed on the store's thread, not the event loop,
        and a publish that wrote it is confirmed after that fsync (``appends``)."""
        self._unsynced.add(path)
        self.changed()

    def hook_wrote(self, path: Path) -> None:
        """A file a ``before_flush`` hook wrote (the definitions journal): the commit
        running it fsyncs it. Its change was counted when made (``changed``), so this
        neither counts again nor schedules another flush."""
        self._unsynced.add(path)

    def when_durable(self, waiter: Waiter) -> None:
        """Call ``waiter(True)`` once everything buffered so far is on disk."""
        self._waiters.append(waiter)
        if not self._flush_scheduled:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="roost-fsync")
        if self.mode == "interval":
            self._interval_handle = loop.call_later(self.interval, self._tick)
        self._idle_handle = loop.call_later(self.idle_close, self._close_idle)

    def _close_idle(self) -> None:
        """Descriptors unused for a whole period are closed: idle queues hold none."""
        assert self._loop is not None
        self.files.close_idle()
        self._idle_handle = self._loop.call_later(self.idle_close, self._close_idle)

    def _tick(self) -> None:
        assert self._loop is not None
        self._interval_handle = self._loop.call_later(self.interval, self._tick)
        if self._write():
            self._start_sync()

    def flush(self) -> None:
        self._flush_scheduled = False
        if self._closed:
            return
        if not self._write():
            return  # out of space: waiters wait for the retry
        if self.mode == "always":
            self._start_sync()
        elif self.mode == "never":
            self._settle(self._take_waiters(), True)

    def _write(self) -> bool:
        """Write every dirty store's buffers; False while some could not be written for
        lack of space (they stay buffered and are retried; see the module doc)."""
        no_space: OSError | None = None
        failed = False
        hooks_done = True
        for hook in self.before_flush:
            try:
                hook()  # e.g. the definitions journal (core.persistence)
            except OSError as exc:
                hooks_done = False
                if exc.errno in NO_SPACE:
                    no_space = exc
                else:
                    failed = True
                    log.error("store: definitions write failed: %s", exc)
        dirty, self._dirty = self._dirty, set()
        dirty |= self._failed
        self._failed = set()
        for store in dirty:
            if store.deleted:
                continue
            try:
                store.write_pending(self._unsynced)
            except OSError as exc:
                self._failed.add(store)
                if exc.errno in NO_SPACE:
                    no_space = exc
                    continue
                failed = True
                log.error("store %s: write failed: %s", store.label, exc)
        if self._failed or not hooks_done:
            self._schedule_retry()
        if no_space is not None:
            self._set_full(True, no_space)
        elif self.full and not self._failed and hooks_done:
            self._set_full(False)
        if failed and no_space is None:
            self._settle(self._take_waiters(), False)
        return no_space is None

    def report_no_space(self, exc: OSError) -> None:
        """A write outside the buffers (a stream append) found the disk full: raise the
        alarm like a failed buffer write; the next retry clears it and lets publishers
        try again."""
        self._set_full(True, exc)
        self._schedule_retry()

    def _set_full(self, full: bool, exc: OSError | None = None) -> None:
        if full == self.full:
            return
        self.full = full
        if full:
            log.error(
                "store: out of disk space (%s); unwritten messages stay in memory and"
                " their confirms wait; retrying every %gs",
                exc,
                self.retry_interval,
            )
        else:
            log.warning("store: writing again after running out of disk space")
        if self.on_full is not None:
            self.on_full(full)

    def _schedule_retry(self) -> None:
        if self._retry_handle is None and self._loop is not None and not self._closed:
            self._retry_handle = self._loop.call_later(self.retry_interval, self._retry)

    def _retry(self) -> None:
        self._retry_handle = None
        self.flush()

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
        future = self._loop.run_in_executor(self._executor, sync_files, paths, dirs)

        def done(fut: asyncio.Future[float]) -> None:
            self._syncing = False
            exc = fut.exception()
            if exc is not None:  # the kernel may have dropped the pages: never confirm
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
        """Write and fsync everything now, on this thread (tests, shutdown). Waiters
        for what could not be written (disk full) hear ``False``."""
        written = self._write()
        paths, self._unsynced = self._unsynced, set()
        dirs, self._new_dirs = self._new_dirs, set()
        if self.mode != "never":
            self.fsync_stats.observe(sync_files(paths, dirs))
        self._settle(self._take_waiters(), written)

    async def close(self) -> None:
        """Finish what is in flight, write and sync the rest, close every file."""
        if self._interval_handle is not None:
            self._interval_handle.cancel()
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        if self._retry_handle is not None:
            self._retry_handle.cancel()
            self._retry_handle = None
        while self._syncing:
            await asyncio.sleep(0.005)
        self.sync_now()
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self.files.close_all()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
