"""The server process: the event loop (uvloop), signals (SIGINT/SIGTERM stop in order,
SIGHUP reopens the log files), systemd's readiness notification, and the garbage
collector's tuning once everything is started."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal

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
    # every listener is open: a Type=notify unit is now started (contrib/roost.service)
    sdnotify.notify("READY=1", "STATUS=accepting connections", f"MAINPID={os.getpid()}")
    await stop.wait()
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
