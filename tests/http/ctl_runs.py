"""The operator CLI (roost ctl) run against a test server."""

from __future__ import annotations

import subprocess
import sys

from tests.support import RoostProcess


def ctl(
    server: RoostProcess, *args: str, ok: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "roost", "ctl", "--url", server.http_url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
    assert (done.returncode == 0) == ok, (args, done.stdout, done.stderr)
    return done
