"""Open file descriptors on demand and close the least recently used ones.

Ten thousand idle queues must not hold ten thousand descriptors: every segment file is
opened when it is read or written and closed again once ``max_open`` others are newer.
The fsync thread opens descriptors of its own, so closing one here never races with it.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path


class FilePool:
    def __init__(self, max_open: int = 256) -> None:
        self.max_open = max_open
        self._fds: OrderedDict[Path, int] = OrderedDict()

    def fd(self, path: Path) -> int:
        fds = self._fds
        fd = fds.get(path)
        if fd is not None:
            fds.move_to_end(path)
            return fd
        while len(fds) >= self.max_open:  # make room first: never close the one returned
            os.close(fds.popitem(last=False)[1])
        fd = fds[path] = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        return fd

    def close(self, path: Path) -> None:
        """Forget a file about to be deleted or replaced."""
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close_all(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    @property
    def open_count(self) -> int:
        return len(self._fds)
