"""The server process: the event loop (uvloop), signals (SIGINT/SIGTERM stop in order,
SIGHUP reopens the log files), systemd's readiness notification, and the garbage
collector's tuning once everything is started."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import time

from roost import logs, sdnotify
from roost.config import Config
from roost.server import Server

log = logging.getLogger("roost.server")


def tune_gc() -> None:
    """Queued messages are many long-lived objects without cycles; CPython's default
    thresholds would rescan them over and over. Collect young objects less often and
    keep everything created at start-up out of the collector's sight."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)


# With the thresholds above a full collection all but never runs on its own, so any
# reference cycle (a closed connection's objects, say: issue 19) would stay for good.
# One this often frees such garbage. It scans what was created since start-up (the rest
# is frozen): under the AMQP CPU bench ~20,000 objects, 0.1-7 ms of CPU, and even one a
# second changed no figure beyond noise. The pause grows with the live objects (about
# 0.4 µs each there), so a large backlog makes it longer: hence minutes apart.
FULL_COLLECTION_EVERY = 300.0


class FullCollections:
    """A full collection every ``every`` seconds on the loop, until ``stop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, every: float) -> None:
        self._loop = loop
        self._every = every
        self._handle = loop.call_later(every, self._run)

    def _run(self) -> None:
        started = time.perf_counter()
        found = gc.collect()
        log.debug("full collection: %d unreachable objects, %.1f ms", found,
                  (time.perf_counter() - started) * 1000)  # fmt: skip
        self._handle = self._loop.call_later(self._every, self._run)

    def stop(self) -> None:
        self._handle.cancel()


async def serve(config: Config) -> None:
    server = Server(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # before the listeners open: a SIGTERM that comes as soon as a client can connect
    # still gets the ordered shutdown (it used to end the process unsaved)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, _reopen_logs)
    await server.start()
    tune_gc()
    collections = FullCollections(loop, FULL_COLLECTION_EVERY)
    # every listener is open: a Type=notify unit is now started (contrib/roost.service)
    sdnotify.notify("READY=1", "STATUS=accepting connections", f"MAINPID={os.getpid()}")
    await stop.wait()
    collections.stop()
    log.info("shutting down")
    sdnotify.notify("STOPPING=1", "STATUS=closing connections")
    await server.stop()


def _reopen_logs() -> None:
    """SIGHUP: reopen the log file (logrotate has moved it away)."""
    count = logs.reopen()
    log.info("SIGHUP: reopened %d log file(s)", count)


def run(config: Config) -> int:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
    return 0
