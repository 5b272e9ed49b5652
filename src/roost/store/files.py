"""Open file descriptors on demand, close the least recently used ones, and close idle
ones.

Ten thousand idle queues must not hold ten thousand descriptors: every segment file is
opened when it is read or written and closed again once ``max_open`` others are newer,
or once it has not been used for an idle period (``close_idle``, called on a timer), so
a quiet broker holds no store descriptors at all. The fsync thread opens descriptors of
its own, so closing one here never races with it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections import OrderedDict
from pathlib import Path

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # write failures that mean "retry later"


def write_all(fd: int, data: bytes | bytearray, offset: int) -> None:
    """pwrite until all of ``data`` is at ``offset``: a nearly full disk may take part
    of a write and refuse the rest (ENOSPC on the next call)."""
    done = os.pwrite(fd, data, offset)
    while done < len(data):
        n = os.pwrite(fd, data[done:], offset + done)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done += n


def append_all(fd: int, data: bytes, end: int) -> None:
    """Append all of ``data`` to an O_APPEND file now ``end`` bytes long. A nearly full
    disk may take part of a write and refuse the rest: then the file is cut back to
    ``end`` before the error is raised, so no torn record sits before later appends."""
    try:
        done = os.write(fd, data)
        while done < len(data):
            n = os.write(fd, data[done:])
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += n
    except OSError:
        truncate_quietly(fd, end)
        raise


def truncate_quietly(fd: int, end: int) -> None:
    """Cut a file back to ``end`` after a failed append; a failure here is left to
    recovery, which drops a torn tail."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, end)


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (after a rename or a new file in it) by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(directory: Path) -> None:
    """``mkdir -p``, then fsync the parent of each directory it made: a file's fsync does
    not persist the entries leading to it, and a power cut would lose them."""
    missing: list[Path] = []
    here = directory
    while not here.exists():
        missing.append(here)
        here = here.parent
    if missing:
        directory.mkdir(parents=True, exist_ok=True)
        for made in reversed(missing):
            fsync_path(made.parent)


LOCK_FILE = "roost.lock"


class DataDirInUse(OSError):
    """Another process holds the data directory's lock."""


def lock_directory(directory: Path) -> int:
    """An exclusive lock on ``directory``, held while the returned descriptor is open
    (the kernel drops it when the process ends, even after kill -9): two servers on one
    data directory would write the same segment files. Raises DataDirInUse naming the
    holder's pid."""
    path = directory / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise DataDirInUse(
            f"data directory {directory} is in use by another roost server (pid {holder})"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


class FilePool:
    def __init__(self, max_open: int = 256) -> None:
        self.max_open = max_open
        # path -> [fd, the idle period it was last used in]; least recently used first
        self._fds: OrderedDict[Path, list[int]] = OrderedDict()
        self._period = 0

    def fd(self, path: Path) -> int:
        fds = self._fds
        entry = fds.get(path)
        if entry is not None:
            fds.move_to_end(path)
            entry[1] = self._period
            return entry[0]
        while len(fds) >= self.max_open:  # make room first: never close the one returned
            os.close(fds.popitem(last=False)[1][0])
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fds[path] = [fd, self._period]
        return fd

    def close_idle(self) -> int:
        """Close every descriptor not used since the previous call; how many."""
        fds = self._fds
        closed = 0
        while fds:
            path, (fd, period) = next(iter(fds.items()))
            if period == self._period:
                break  # used since: it and everything after it are recent
            del fds[path]
            os.close(fd)
            closed += 1
        self._period += 1
        return closed

    def close(self, path: Path) -> None:
        """Forget a file about to be deleted or replaced."""
        entry = self._fds.pop(path, None)
        if entry is not None:
            os.close(entry[0])

    def close_all(self) -> None:
        for fd, _period in self._fds.values():
            os.close(fd)
        self._fds.clear()

    @property
    def open_count(self) -> int:
        return len(self._fds)
