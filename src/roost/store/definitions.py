"""Definitions on disk: a snapshot, a journal of the changes since, and their backups.

Files under the data directory::

    definitions.json           the snapshot (temp file, fsync, rename, directory fsync)
    definitions.json.bak       the snapshot before it (a hard link made before each save)
    definitions.journal        records of every change since the snapshot
    definitions.journal.prev   the journal that led from the .bak to the snapshot
    definitions.json.damaged-<time>   a file that could not be read, kept as evidence

A journal record is framed like a segment record (``[u32 length][u32 crc32][payload]``,
store/segment.py) around one JSON object the core writes (core/journal.py). Appends are
written at once and fsync'ed by the store's group commit (``on_write`` hands the path to
it), so a reply that waits for that commit waits for its change to be durable, and many
changes in flight share one fsync.

``load`` never deletes anything and never gives up on the whole: an unreadable snapshot
is renamed aside and the .bak (with both journals) is used instead; damaged journal
records are dropped with a warning and the scan resumes after them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.store.atomic_file import write_new
from roost.store.files import fsync_path, write_all
from roost.store.segment import ScanResult, frame, scan

log = logging.getLogger("roost.store")

FILE = "definitions.json"
BACKUP = FILE + ".bak"
JOURNAL = "definitions.journal"
PREVIOUS = JOURNAL + ".prev"

# (snapshot or None, journal records to replay onto it in order)
Loaded = tuple[dict[str, Any] | None, list[dict[str, Any]]]


class DefinitionsFile:
    def __init__(self, data_dir: Path, on_write: Callable[[Path], None] | None = None) -> None:
        self.dir = data_dir
        self.path = data_dir / FILE
        self.backup = data_dir / BACKUP
        self.journal = data_dir / JOURNAL
        self.previous = data_dir / PREVIOUS
        # the group commit's hook: fsync this file with the next batch (store/hub.py)
        self.on_write = on_write
        self.journal_size = 0
        self.snapshot_size = 0
        self.damaged: list[Path] = []  # files moved aside by load

    # -- reading ----------------------------------------------------------------------

    def load(self) -> Loaded | None:
        """The snapshot and the journal records to replay onto it; None on a first start
        (nothing saved at all)."""
        if not any(p.exists() for p in (self.path, self.backup, self.journal)):
            return None
        base = self._read_snapshot(self.path)
        journals = [self.journal]
        if base is None and self.backup.exists():
            base = self._read_snapshot(self.backup)
            if base is not None:
                log.warning(
                    "definitions: using the previous copy %s and the journals since",
                    self.backup.name,
                )
                journals.insert(0, self.previous)
                if not self.previous.exists():
                    log.warning(
                        "definitions: %s is missing: changes made between the previous copy"
                        " and the damaged one may be lost",
                        self.previous.name,
                    )
        records: list[dict[str, Any]] = []
        for path in journals:
            records += self._read_journal(path)
        self.journal_size = _size(self.journal)
        self.snapshot_size = _size(self.path)
        if base is None and not records:
            log.warning("definitions: nothing readable left; starting with the defaults")
        return base, records

    def _read_snapshot(self, path: Path) -> dict[str, Any] | None:
        try:
            text = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self._set_aside(path, str(exc))
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            self._set_aside(path, str(exc))
            return None
        if not isinstance(data, dict):
            self._set_aside(path, "not a JSON object")
            return None
        return data

    def _read_journal(self, path: Path) -> list[dict[str, Any]]:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return []
        result = ScanResult()
        out: list[dict[str, Any]] = []
        for offset, payload in scan(raw, result, min_length=2):
            try:
                record = json.loads(bytes(payload))
            except ValueError:
                record = None
            if isinstance(record, dict):
                out.append(record)
            else:
                log.warning("definitions: %s@%d is not a record, dropped", path.name, offset)
        for offset, length in result.dropped:
            log.warning("definitions: %s@%d damaged, %d bytes dropped", path.name, offset, length)
        if result.torn_tail:
            log.warning(
                "definitions: %s torn tail of %d bytes dropped", path.name, result.torn_tail
            )
            if path == self.journal:  # appends go after the last intact record
                with path.open("r+b") as fh:
                    fh.truncate(result.valid_end)
        return out

    def _set_aside(self, path: Path, why: str) -> None:
        """Keep an unreadable file as evidence under a name nothing reads or overwrites."""
        aside = self.keep_evidence(path, move=True)
        log.error("definitions: %s is damaged (%s); moved to %s", path.name, why, aside.name)

    def keep_evidence(self, path: Path | None = None, *, move: bool = False) -> Path:
        """``path`` (the snapshot by default) as ``<name>.damaged-<time>``: renamed, or
        copied (with the journal) when the broker still runs on what it could read of it,
        so that the next save cannot overwrite the evidence."""
        source = path or self.path
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = source.with_name(f"{source.name}.damaged-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = source.with_name(f"{source.name}.damaged-{stamp}-{n}")
        if move:
            os.replace(source, aside)
        else:
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(source, aside)
            if self.journal.exists():
                shutil.copyfile(self.journal, aside.with_name(aside.name + ".journal"))
        fsync_path(self.dir)
        self.damaged.append(aside)
        return aside

    # -- writing ----------------------------------------------------------------------

    def append(self, records: list[dict[str, Any]]) -> None:
        """Write change records at the end of the journal (fsync'ed by the group commit).
        An OSError leaves the journal as it was before the call (a retry rewrites it)."""
        if not records:
            return
        data = b"".join(
            frame(json.dumps(r, separators=(",", ":"), default=str).encode("utf-8"))
            for r in records
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        new = not self.journal.exists()
        fd = os.open(self.journal, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            write_all(fd, data, self.journal_size)
        finally:
            os.close(fd)
        self.journal_size += len(data)
        if self.on_write is not None:
            self.on_write(self.journal)
        if new:
            fsync_path(self.dir)

    def save(self, data: dict[str, Any]) -> None:
        """A new snapshot of everything, after which the journal starts afresh. The old
        snapshot stays as the .bak and the old journal as the .prev, so that a damaged
        snapshot can be rebuilt from them. The caller has journaled every change it made
        before this (the .prev must be complete)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        raw = json.dumps(data, separators=(",", ":"), default=str).encode("utf-8")
        write_new(tmp, raw, mode=0o600)  # a full disk: raises, the old file stands
        first = not self.path.exists()
        if not first:  # the last good snapshot becomes the backup
            self._link(self.path, self.backup)
        os.replace(tmp, self.path)
        if first:  # the backup of a first snapshot is a copy of it, with no history
            self._link(self.path, self.backup, copy=True)
            self.previous.write_bytes(b"")
        if self.journal.exists():
            fsync_path(self.journal)  # it becomes the .prev: complete and on disk
            os.replace(self.journal, self.previous)
        fsync_path(self.dir)
        self.journal_size = 0
        self.snapshot_size = len(raw)

    @staticmethod
    def _link(source: Path, target: Path, *, copy: bool = False) -> None:
        """``target`` becomes ``source`` atomically: a hard link to a file about to be
        replaced (its inode then lives on as ``target`` only), or a copy of its bytes
        (a link to a file that stays would share any damage done to it)."""
        link = target.with_name(target.name + ".tmp")
        link.unlink(missing_ok=True)
        linked = False
        if not copy:
            try:
                os.link(source, link)
                linked = True
            except OSError:  # no hard links on this file system
                pass
        if not linked:
            shutil.copyfile(source, link)
            fsync_path(link)
        os.replace(link, target)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0

