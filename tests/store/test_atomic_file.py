"""The store's one way to rewrite a file whole (store/atomic_file.py): the new content
replaces the old entirely, a crash or a full disk before the rename leaves the old file,
and a durable rewrite fsyncs the data before the rename and the directory after it.

fsync's effect (surviving a power cut) cannot be observed from a test; what can is the
order of the calls made to the kernel, recorded here by wrapping ``os.fsync`` and
``os.replace`` (the store is not compiled, so its calls go through them)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roost.store.atomic_file import replace_file, temp_path, write_new

OLD = b"old content, longer than the new one " * 100


def test_the_new_content_replaces_the_old_whole(tmp_path: Path) -> None:
    path = tmp_path / "state"
    path.write_bytes(OLD)
    replace_file(path, b"new")
    assert path.read_bytes() == b"new"  # no tail of the longer old content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]  # no temporary file


def test_a_crash_before_the_rename_leaves_the_old_file(tmp_path: Path) -> None:
    """A process killed between writing the temporary file and renaming it: the file
    still holds the old content, and the next rewrite overwrites the leftover."""
    path = tmp_path / "state"
    path.write_bytes(OLD)
    child = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from roost.store.atomic_file import temp_path, write_new\n"
        "path = Path(sys.argv[1])\n"
        "write_new(temp_path(path), b'half of a rewrite ' * 1000)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(path)], check=False)
    assert done.returncode == -signal.SIGKILL
    assert path.read_bytes() == OLD
    assert temp_path(path).exists()  # what the crash left behind
    replace_file(path, b"new")
    assert path.read_bytes() == b"new"
    assert not temp_path(path).exists()


def test_a_full_disk_leaves_the_old_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state"
    path.write_bytes(OLD)
    real = os.pwrite

    def nearly_full(fd: int, data: Any, offset: int) -> int:
        if offset:  # the second call, for the rest: no room left
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, bytes(data[:10]), offset)  # the disk takes part of the write

    monkeypatch.setattr(os, "pwrite", nearly_full)
    with pytest.raises(OSError) as raised:
        replace_file(path, b"new content " * 100)
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def _record_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Each fsync (by the path its descriptor is open on) and rename, in order."""
    calls: list[tuple[str, ...]] = []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(fd: int) -> None:
        calls.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def recording_replace(src: Any, dst: Any) -> None:
        calls.append(("replace", str(src), str(dst)))
        replace(src, dst)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    return calls


def test_a_durable_rewrite_fsyncs_the_data_then_renames_then_fsyncs_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state"
    path.write_bytes(OLD)
    calls = _record_calls(monkeypatch)
    replace_file(path, b"new")
    tmp = str(temp_path(path))
    assert calls == [("fsync", tmp), ("replace", tmp, str(path)), ("fsync", str(tmp_path))]


def test_a_rewrite_that_is_not_durable_only_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mark"
    calls = _record_calls(monkeypatch)
    replace_file(path, b"new", tmp=tmp_path / "mark.part", durable=False)
    assert calls == [("replace", str(tmp_path / "mark.part"), str(path))]
    assert path.read_bytes() == b"new"


def test_write_new_keeps_the_mode_asked_for(tmp_path: Path) -> None:
    """The definitions snapshot (users' password hashes) is written owner-only."""
    tmp = tmp_path / "secret.tmp"
    write_new(tmp, b"x", mode=0o600)
    assert tmp.stat().st_mode & 0o777 == 0o600
