"""Queue and delayed-exchange directories that nothing durable claimed after recovery:
moved to ``lost+found/<time>/`` with a warning naming each, never deleted."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from roost.store.files import fsync_path
from roost.store.member_log import MEMBER_FILE
from roost.store.queue_store import OWNER_FILE

log = logging.getLogger("roost.store")

LOST_DIR = "lost+found"  # under the data dir: queue directories nothing claimed at start


def quarantine_orphans(data_dir: Path, opened: set[Path]) -> list[Path]:
    """After recovery: move queue (and delayed-exchange) directories that nothing
    durable claimed to ``lost+found/<time>/`` with a warning naming each, never
    deleting them: their definitions may have been lost to damage, and their
    messages are all that is left. (With definitions journaled before any reply,
    only damage or a declare with nowait and no confirm can leave one.)"""
    moved: list[Path] = []
    target = data_dir / LOST_DIR / time.strftime("%Y%m%dT%H%M%S")
    for pattern in ("vhosts/*/queues/*", "vhosts/*/delayed/*"):
        for directory in sorted(data_dir.glob(pattern)):
            if not directory.is_dir() or directory in opened:
                continue
            if (directory / MEMBER_FILE).exists() and (directory / OWNER_FILE).exists():
                continue  # a quorum member's copy: its cluster node claims it at start
            dest = target / directory.relative_to(data_dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(directory, dest)
            moved.append(dest)
            log.warning(
                "store: %s (%s, %d files, %d bytes) belongs to nothing durable; moved to %s",
                directory,
                _owner(dest),
                *_usage(dest),
                dest,
            )
    if moved:
        fsync_path(data_dir)
    return moved


def _owner(directory: Path) -> str:
    """Whose directory this was, from the note its store wrote when it made it."""
    try:
        owner = json.loads((directory / OWNER_FILE).read_text("utf-8"))
        return f"{owner['kind']} '{owner['name']}' in vhost '{owner['vhost']}'"
    except (OSError, ValueError, KeyError, TypeError):
        return "owner unknown"


def _usage(directory: Path) -> tuple[int, int]:
    files = [f for f in directory.rglob("*") if f.is_file()]
    return len(files), sum(f.stat().st_size for f in files)
