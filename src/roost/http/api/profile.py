"""/api/profile: where the broker's time goes, for administrators (a Roost addition, as
dispatchd's debug port and the Agora seed's ``-profile``; ``roost ctl profile``).

``POST /api/profile?seconds=N`` records N seconds of the event loop's thread, where
every connection, queue and HTTP request is served, and answers with the file:

- ``format=pstats`` (default): cProfile statistics, for ``python -m pstats FILE`` or
  snakeviz; exact call counts, at a cost while it runs (every call is traced);
- ``format=flamegraph`` or ``speedscope``: py-spy samples the process 100 times a second
  without stopping it and draws an SVG flame graph (or a speedscope JSON file); needs
  py-spy (``pip install roost[profile]``), else 501.

One recording at a time (409 while one runs). Nothing is traced between recordings.
"""

from __future__ import annotations

import asyncio
import cProfile
import marshal
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

from roost.http.routes import Route
from roost.http.util import ADMINISTRATOR, HTTPProblem, access, bad_request

MAX_SECONDS = 600
PY_SPY_FORMATS = {
    "flamegraph": ("svg", "image/svg+xml"),
    "speedscope": ("json", "application/json"),
}
_busy = asyncio.Lock()


def _seconds(request: web.Request) -> float:
    try:
        seconds = float(request.query.get("seconds", "10"))
    except ValueError:
        raise bad_request("seconds must be a number") from None
    if not 0 < seconds <= MAX_SECONDS:
        raise bad_request(f"seconds must be in (0, {MAX_SECONDS}]")
    return seconds


def py_spy() -> str | None:
    """py-spy on PATH, or beside this Python (a venv's bin/, pipx's)."""
    beside = Path(sys.executable).with_name("py-spy")
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


async def _cprofile(seconds: float) -> bytes:
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        await asyncio.sleep(seconds)
    finally:
        profiler.disable()
    profiler.create_stats()
    return marshal.dumps(profiler.stats)  # the file format of pstats and dump_stats


async def _py_spy(tool: str, seconds: float, fmt: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="roost-profile-") as tmp:
        out = Path(tmp) / "profile"
        proc = await asyncio.create_subprocess_exec(
            tool,
            "record",
            "--pid",
            str(os.getpid()),
            "--duration",
            str(max(1, round(seconds))),
            "--format",
            fmt,
            "--output",
            str(out),
            "--nonblocking",  # never pauses the broker to take a sample
            "--idle",  # an idle broker's samples too (waiting in the loop), not an error
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        said, _ = await proc.communicate()
        if proc.returncode != 0 or not out.exists():
            text = said.decode("utf-8", "replace").strip().splitlines()
            errors = [line for line in text if line.startswith("Error:")]
            reason = (errors or text or [f"exit status {proc.returncode}"])[0]
            raise HTTPProblem(500, "internal_error", f"py-spy failed: {reason}")
        return await asyncio.to_thread(out.read_bytes)


@access(ADMINISTRATOR)
async def profile(request: web.Request) -> web.Response:
    seconds = _seconds(request)
    fmt = request.query.get("format", "pstats")
    if fmt != "pstats" and fmt not in PY_SPY_FORMATS:
        raise bad_request("format must be pstats, flamegraph or speedscope")
    tool = py_spy() if fmt in PY_SPY_FORMATS else None
    if fmt in PY_SPY_FORMATS and tool is None:
        raise HTTPProblem(
            501, "not_implemented", "py-spy is not installed (pip install 'roost[profile]')"
        )
    if _busy.locked():
        raise HTTPProblem(409, "conflict", "a profile is being recorded already")
    async with _busy:
        if tool is None:
            body, ext, ctype = await _cprofile(seconds), "pstats", "application/octet-stream"
        else:
            ext, ctype = PY_SPY_FORMATS[fmt]
            body = await _py_spy(tool, seconds, fmt)
    name = time.strftime(f"roost-profile-%Y%m%d-%H%M%S.{ext}")
    return web.Response(
        body=body,
        content_type=ctype,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


ROUTES = [
    Route(
        "POST",
        "/api/profile",
        profile,
        "Record N seconds of the broker's time: cProfile stats or a py-spy flame graph",
        query=("seconds", "format"),
    ),
]
