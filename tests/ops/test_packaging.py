"""Packaging: ``python -m build`` makes a wheel and an sdist without setuptools'
license warning; the wheel installs with pip into a fresh venv (and serves the web UI
from its package data), the sdist with pipx; ``roost --version`` says the version the
package metadata carries."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

import roost
from tests.support import RoostProcess

ROOT = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(
    ".venv", ".git", ".cache", "data", "__pycache__", "*.egg-info", "build", "dist", ".*_cache"
)


def run(*args: str | Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=540,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_build_install_with_pip_and_pipx(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=SKIP)
    dist = tmp_path / "dist"
    out = run(sys.executable, "-m", "build", "--outdir", dist, source)
    assert "license" not in out.lower().replace("license-files", ""), out
    wheel = next(dist.glob("roost-*.whl"))
    sdist = next(dist.glob("roost-*.tar.gz"))
    # a compiled wheel where mypyc and a C compiler built the hot path, else a pure one
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name.startswith(
        (f"roost-{roost.__version__}-py3-none-any", f"roost-{roost.__version__}-{tag}-{tag}-")
    ), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(f"roost-{roost.__version__}.dist-info/METADATA").decode()
    assert {"roost/http/ui/index.html", "roost/py.typed", "roost/logs.py"} <= names
    assert "License-Expression: Apache-2.0" in metadata
    with tarfile.open(sdist) as tf:
        members = {m.split("/", 1)[1] for m in tf.getnames() if "/" in m}
    assert {"contrib/roost.service", "contrib/logrotate", "roost.sample.toml"} <= members

    # pip: a fresh venv, the wheel and its pinned dependencies
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    run(env_dir / "bin" / "python", "-m", "pip", "install", "--quiet", wheel)
    installed = env_dir / "bin" / "roost"
    assert run(installed, "--version").strip().startswith(f"roost {roost.__version__}")
    server = RoostProcess(tmp_path / "data")
    server_env = {"PATH": f"{env_dir / 'bin'}:{os.environ['PATH']}"}
    server.env = server_env
    server.python = str(env_dir / "bin" / "python")
    server.start()
    try:
        page = httpx.get(server.http_url + "/", timeout=10)
        assert page.status_code == 200 and "<title>Roost" in page.text
        assert str(env_dir) in run(
            env_dir / "bin" / "python", "-c", "import roost; print(roost.__file__)"
        )
    finally:
        server.stop()

    # pipx: the sdist, into an isolated home
    home = tmp_path / "pipx"
    # the pure build here: the wheel above is the compiled one, and compiling twice costs
    # a minute of the suite
    pipx_env = {"PIPX_HOME": str(home), "PIPX_BIN_DIR": str(home / "bin"), "ROOST_PURE_PYTHON": "1"}
    run(sys.executable, "-m", "pipx", "install", sdist, env=pipx_env)
    version = run(home / "bin" / "roost", "--version").strip()
    assert version.startswith(f"roost {roost.__version__}") and "pure Python" in version, version
