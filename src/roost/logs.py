"""Logging outputs and levels, set from the config (docs/operations.md#logs).

Two outputs, each with its own level and format: the console (stderr, which journald
and container runtimes collect) and a file that SIGHUP reopens, so logrotate can move it
away without copying (contrib/logrotate). Formats: RabbitMQ-like text, or one JSON
object per line. Categories (connection, channel, queue, store, http, federation, …)
name groups of loggers whose level can be set apart from the rest, as RabbitMQ's
``log.connection.level``; the category a logger belongs to is decided by its name.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "none": logging.CRITICAL + 10,  # RabbitMQ's "none": nothing at all
}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# category -> the loggers (and their children) it sets; "default" is the root of roost.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "connection": ("roost.connection", "roost.amqp", "roost.stomp", "roost.mqtt", "roost.tls"),
    "channel": ("roost.channel",),
    "queue": (
        "roost.queue",
        "roost.vhost",
        "roost.deadletter",
        "roost.consumer_timeout",
        "roost.delayed",
        "roost.policies",
        "roost.mutators",
    ),
    "stream": ("roost.stream",),
    "store": ("roost.store",),
    "http": ("roost.http", "roost.statsd", "aiohttp"),
    "definitions": ("roost.definitions",),
    "alarms": ("roost.alarms", "roost.flow"),
    "federation": ("roost.federation",),
    "shovel": ("roost.shovel",),
    "cluster": ("roost.cluster",),
    "tracing": ("roost.trace",),
    "events": ("roost.events",),
    "default": ("roost",),
}

# attributes every LogRecord has; anything else came from ``extra=`` and goes into JSON
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def level(name: str) -> int:
    try:
        return LEVELS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown log level '{name}' (one of {', '.join(LEVELS)})") from None


def parse_categories(text: str | Mapping[str, str] | None) -> dict[str, int]:
    """``connection=debug,queue=warning`` (flag, environment) or a TOML table."""
    if not text:
        return {}
    pairs: list[tuple[str, str]]
    if isinstance(text, Mapping):
        pairs = [(str(k), str(v)) for k, v in text.items()]
    else:
        pairs = []
        for part in text.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"log category must be NAME=LEVEL, got '{part.strip()}'")
            pairs.append((key.strip(), value.strip()))
    out: dict[str, int] = {}
    for key, value in pairs:
        if key not in CATEGORIES:
            known = ", ".join(CATEGORIES)
            raise ValueError(f"unknown log category '{key}' (one of {known})")
        out[key] = level(value)
    return out


class JSONFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC, ms), level, logger, msg, pid, and
    every field passed with ``extra=`` (a connection's user, vhost, peer, …), the names
    RabbitMQ's JSON formatter uses for the first four."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}+00:00",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            "pid": record.process,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class ReopenableFileHandler(logging.FileHandler):
    """A file output that :meth:`reopen` closes and opens again by name: after logrotate
    has renamed the file, new lines go to a new file of the old name."""

    def reopen(self) -> None:
        self.acquire()
        try:
            if self.stream is not None:
                self.stream.close()
            self.stream = self._open()
        finally:
            self.release()


def _formatter(kind: str) -> logging.Formatter:
    if kind == "json":
        return JSONFormatter()
    if kind == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format must be text or json, got '{kind}'")


def configure(
    *,
    level_name: str = "info",
    console: bool = True,
    console_level: str | None = None,
    console_format: str = "text",
    file: str | None = None,
    file_level: str | None = None,
    file_format: str | None = None,
    categories: str | Mapping[str, str] | None = None,
    stream: TextIO | None = None,
) -> list[logging.Handler]:
    """Replace the root logger's outputs; raises ValueError on a bad level, format or
    category (before anything changes) and OSError when the file cannot be opened."""
    root_level = level(level_name)
    by_category = parse_categories(categories)
    handlers: list[logging.Handler] = []
    if console:
        out = logging.StreamHandler(stream or sys.stderr)
        out.setFormatter(_formatter(console_format))
        if console_level:
            out.setLevel(level(console_level))
        handlers.append(out)
    if file:
        os.makedirs(os.path.dirname(os.path.abspath(file)), exist_ok=True)
        fh = ReopenableFileHandler(file, encoding="utf-8")
        fh.setFormatter(_formatter(file_format or console_format))
        if file_level:
            fh.setLevel(level(file_level))
        handlers.append(fh)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(root_level)
    for category, names in CATEGORIES.items():
        for name in names:
            # unset categories follow the root level (NOTSET), set ones override it
            logging.getLogger(name).setLevel(by_category.get(category, logging.NOTSET))
    return handlers


def reopen() -> int:
    """Reopen every file output (SIGHUP); returns how many were reopened."""
    count = 0
    for handler in logging.getLogger().handlers:
        if isinstance(handler, ReopenableFileHandler):
            handler.reopen()
            count += 1
    return count
