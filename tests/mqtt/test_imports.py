"""Each roost.mqtt module imports on its own, in a fresh interpreter, and pulls in no
I/O machinery and nothing of the broker (sans-IO: bytes in, packets out)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import roost.mqtt

# the adapter's own modules (the session and its parts, mapping, retained, shared
# subscriptions, the plumbing) use the core
ADAPTER = {"session", "connecting", "publishing", "subscribing", "delivering", "mapping",
           "retained", "protocol", "ws", "shared", "subscriptions"}
MODULES = [
    f"roost.mqtt.{m.name}"
    for m in pkgutil.iter_modules(roost.mqtt.__path__)
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
