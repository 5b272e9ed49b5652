"""Each codec module imports on its own, in any order, and pulls in no I/O machinery."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = ["roost.amqp.codec", "roost.amqp.codec_methods", "roost.amqp.errors"]
FORBIDDEN = ["asyncio", "socket", "selectors", "roost.core", "roost.store", "uvloop"]


@pytest.mark.parametrize("module", MODULES)
def test_imports_alone_and_stays_sans_io(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "from roost.amqp.codec import FrameReader\n"
        "FrameReader()\n"
        "from roost.amqp.errors import reply_text\n"
        "assert reply_text(404, 'x') == 'NOT_FOUND - x'\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
