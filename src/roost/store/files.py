"""Open file descriptors on demand and close the least recently used ones.

Ten thousand idle queues must not hold ten thousand descriptors: every segment file is
opened when it is read or written and closed again once ``max_open`` others are newer.
Files being fsync'ed by the writer thread are pinned and never closed under it.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path


class FilePool:
    def __init__(self, max_open: int = 256) -> None:
        self.max_open = max_open
        self._fds: OrderedDict[Path, int] = OrderedDict()
        self._pins: dict[Path, int] = {}
        self._doomed: dict[Path, int] = {}  # deleted while pinned: closed at unpin

    def fd(self, path: Path) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._fds[path] = fd
        if len(self._fds) > self.max_open:
            self._evict()
        return fd

    def _evict(self) -> None:
        for path in list(self._fds):
            if len(self._fds) <= self.max_open:
                return
            if path not in self._pins:
                os.close(self._fds.pop(path))

    def pin(self, path: Path) -> int:
        self._pins[path] = self._pins.get(path, 0) + 1  # first, so fd() cannot evict it
        return self.fd(path)

    def unpin(self, path: Path) -> None:
        left = self._pins.get(path, 0) - 1
        if left > 0:
            self._pins[path] = left
        else:
            self._pins.pop(path, None)
            doomed = self._doomed.pop(path, None)
            if doomed is not None:
                os.close(doomed)
            if len(self._fds) > self.max_open:
                self._evict()

    def close(self, path: Path) -> None:
        """Forget a file about to be deleted (a pinned one is closed when unpinned)."""
        fd = self._fds.pop(path, None)
        if fd is None:
            return
        if path in self._pins:
            self._doomed[path] = fd
        else:
            os.close(fd)

    def close_all(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        for fd in self._doomed.values():
            os.close(fd)
        self._fds.clear()
        self._pins.clear()
        self._doomed.clear()

    @property
    def open_count(self) -> int:
        return len(self._fds)
