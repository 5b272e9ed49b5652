"""Each management module imports on its own (no import cycles), and the operator CLI
never pulls in the broker or aiohttp: it is an HTTP client."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import roost.core
import roost.ctl
import roost.http
import roost.http.api

# every module of the core (its components and both ports), the HTTP layer and the CLI
MODULES = sorted(
    {
        m.name
        for pkg in (roost.http, roost.http.api, roost.ctl)
        for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")
    }
    | {m.name for m in pkgutil.walk_packages(roost.core.__path__, "roost.core.")}
)

# One fresh interpreter; before each module every roost module is forgotten, so each
# import starts from nothing and a cycle shows up as that module's ImportError.
ALONE = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "roost" or m.startswith("roost.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
assert not failed, failed
"""

CLIENT_ONLY = """
import sys, roost.ctl.commands, roost.ctl.parser
bad = [m for m in ("roost.core", "roost.server", "aiohttp", "asyncio") if m in sys.modules]
assert not bad, bad
"""


def test_each_imports_alone() -> None:
    result = subprocess.run([sys.executable, "-c", ALONE, *MODULES], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_ctl_stays_a_client() -> None:
    result = subprocess.run([sys.executable, "-c", CLIENT_ONLY], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
