"""definitions.json under the data directory, written atomically (temp, fsync, rename)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("roost.store")

FILE = "definitions.json"


class DefinitionsFile:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE

    def load(self) -> dict[str, Any] | None:
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            log.warning("definitions: %s is damaged (%s); starting with defaults", self.path, exc)
            return None
        return data if isinstance(data, dict) else None

    def save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        raw = json.dumps(data, separators=(",", ":"), default=str).encode("utf-8")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:  # a full disk: the old file stands, leave no half-written temp
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
