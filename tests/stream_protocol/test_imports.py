"""Each roost.stream_protocol codec module imports on its own, in a fresh interpreter,
and pulls in no I/O machinery and nothing of the broker (sans-IO: bytes in, packets out)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import roost.stream_protocol

# the codec's modules; the adapter (session.py, commands*.py, consumers.py, publishers.py,
# publish_batch.py, deliver_chunks.py, chunk_mapping.py, on the core's port and the
# store's record format)
# and its asyncio plumbing (protocol.py) are not sans-IO in this sense
ADAPTER = {"session", "protocol", "commands", "commands_base", "commands_consume",
           "commands_publish", "consumers", "publishers", "single_active", "publish_batch",
           "deliver_chunks", "chunk_mapping"}
MODULES = [
    f"roost.stream_protocol.{m.name}"
    for m in pkgutil.iter_modules(roost.stream_protocol.__path__)
    if m.name not in ADAPTER
]
FORBIDDEN = ["asyncio", "socket", "selectors", "ssl", "roost.core", "roost.store", "roost.server",
             "uvloop", "aiohttp"]


@pytest.mark.parametrize("module", MODULES)
def test_imports_alone_and_stays_sans_io(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
