"""Replace a file's whole content atomically: the new bytes go to a temporary file beside
it, which is then renamed over it, so a reader, or a restart after a crash, finds the old
content or the new one, never a mix or a short file.

``durable`` (the default) adds the two fsyncs that make the new content survive a power
cut: the temporary file's before the rename (else the rename may reach the disk before
the data, leaving a short or empty file under the name), and the directory's after it
(the rename is a change of the directory). Files that are rebuilt when lost or stale (an
index, a cache of what the records say, a replication mark) skip both.
"""

from __future__ import annotations

import os
from pathlib import Path

from roost.store.files import fsync_path, write_all


def temp_path(path: Path) -> Path:
    """The usual temporary file for ``path``: its name with ``.tmp`` added."""
    return path.with_name(path.name + ".tmp")


def write_new(
    tmp: Path, data: bytes | bytearray, *, mode: int = 0o644, durable: bool = True
) -> None:
    """``tmp`` created or truncated to hold ``data`` (fsynced when ``durable``). On a
    failure (a full disk) it is removed before the error is raised: no half-written
    temporary file is left behind, and the file it was to replace is untouched."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        write_all(fd, data, 0)
        if durable:
            os.fsync(fd)
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)


def install(tmp: Path, path: Path, *, durable: bool = True) -> None:
    """``tmp`` (written by ``write_new``) renamed over ``path``; when ``durable``, the
    directory is fsynced so that the rename itself survives a power cut."""
    os.replace(tmp, path)
    if durable:
        fsync_path(path.parent)


def replace_file(
    path: Path,
    data: bytes | bytearray,
    *,
    tmp: Path | None = None,
    mode: int = 0o644,
    durable: bool = True,
) -> None:
    """``path`` now holds ``data`` and nothing else, replaced in one rename."""
    tmp = temp_path(path) if tmp is None else tmp
    write_new(tmp, data, mode=mode, durable=durable)
    install(tmp, path, durable=durable)
