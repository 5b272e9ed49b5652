"""Both builds (docs/compiled.md): the mypyc-compiled hot-path modules are what runs where
they are built, and ROOST_PURE_PYTHON=1 runs the pure-Python sources, which pass the codec
and parser tests too (the rest of the suite runs on whichever build is installed)."""

from __future__ import annotations

import importlib.machinery
import os
import re
import runpy
import subprocess
import sys
import types
from pathlib import Path

import pytest
import setuptools

from roost import _build
from roost.amqp import codec
from roost.stomp import frames

ROOT = Path(__file__).resolve().parents[2]
REQUIRE = os.environ.get("ROOST_REQUIRE_TOOLS") == "1"


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != _build.PURE_ENV}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, check=True,
                          capture_output=True, text=True, timeout=60).stdout


def test_setup_compiles_the_modules_build_names() -> None:
    listed = re.findall(r'"src/(roost/[\w/]+)\.py"', (ROOT / "setup.py").read_text())
    assert [p.replace("/", ".") for p in listed] == list(_build.COMPILED_MODULES)


def test_the_compiled_modules_run_where_built() -> None:
    """scripts/test installs a C compiler and Python's headers, so the suite's build is the
    compiled one (ROOST_REQUIRE_TOOLS=1); elsewhere this holds only where it was built."""
    if not REQUIRE and not _build.compiled_modules():
        pytest.skip("the pure build is installed here (no C compiler or Python headers)")
    assert not _build.stale_extensions(), "pip install -e . rebuilds the extensions"
    for module in (codec, frames):
        assert isinstance(module.__spec__.loader, importlib.machinery.ExtensionFileLoader)
        assert module.__file__ is not None and not module.__file__.endswith(".py")
    assert _build.compiled_modules() == list(_build.COMPILED_MODULES)
    assert "compiled (mypyc" in _build.describe()
    out = _run("from roost.cli import main; main(['--version'])")
    count = len(_build.COMPILED_MODULES)
    assert out.startswith("roost ") and f"compiled (mypyc: {count} hot-path modules)" in out


def test_the_stomp_frame_and_the_default_route_run_compiled() -> None:
    """A dataclass's generated ``__init__`` stays interpreted inside a compiled module (it
    was 3.3% of the STOMP server's CPU), and so was the default exchange, which every
    publish to a queue by name routes through: both are compiled where the build is."""
    if not REQUIRE and not _build.compiled_modules():
        pytest.skip("the pure build is installed here (no C compiler or Python headers)")
    from roost.core.exchanges.default import DefaultExchange

    for method in (frames.Frame.__init__, DefaultExchange.route):
        assert not isinstance(method, types.FunctionType), method


def test_pure_python_runs_with_the_env_switch() -> None:
    out = _run(
        "import importlib.machinery as m\n"
        "from roost import _build\n"
        "import importlib, roost.server\n"
        "from roost.amqp import codec\n"
        "for name in _build.COMPILED_MODULES:\n"
        "    mod = importlib.import_module(name)\n"
        "    assert type(mod.__spec__.loader) is m.SourceFileLoader, mod\n"
        "    assert mod.__file__.endswith('.py'), mod.__file__\n"
        "raw = codec.encode_table({'a': 1, 'b': 'x'})\n"
        "assert codec.decode_table(raw, 0)[0] == {'a': 1, 'b': 'x'}\n"
        "print(_build.describe())\n",
        ROOST_PURE_PYTHON="1",
    )
    assert out.strip() == "pure Python (ROOST_PURE_PYTHON=1)"


# The unit tests of what is compiled, run again on the pure build (the rest of the suite
# runs on the compiled one): the codecs, the AMQP session and handlers over the core
# (tests/amqp drives them in process), the sans-IO STOMP session, the core's sessions,
# queues, exchanges and flow, and the store's in-process tests. In four groups, each in
# a process of its own with its own time limit: as one they took ~75 s of wall time on a
# 2-core box at load ~10 (17 s of CPU), close to the suite's 120 s per test.
PURE_TESTS: dict[str, tuple[str, ...]] = {
    # the connection state machine's Hypothesis run is ~half of the codec tests' time
    "codec-state-machine": ("tests/codec/test_connection_state_machine.py",),
    "codec": (
        "tests/codec", "--deselect",
        "tests/codec/test_connection_state_machine.py::TestConnectionStateMachine::runTest",
    ),
    "core-amqp": (
        "tests/core", "tests/amqp", "tests/unit/test_session.py",
        "tests/unit/test_exchanges.py", "tests/unit/test_flow.py",
        "tests/unit/test_lifecycle.py", "tests/stomp/test_subscription_queue.py",
    ),
    "stomp-store": (
        "tests/stomp/test_frames.py", "tests/stomp/test_session.py",
        "tests/stomp/test_handler_unit.py", "tests/stomp/test_plumbing_effects.py",
        "tests/store/test_codec.py", "tests/store/test_store_contract.py",
        "tests/store/test_journal.py", "tests/store/test_queue_store.py",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("group", list(PURE_TESTS))
def test_codec_core_and_store_tests_pass_on_the_pure_build(group: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != _build.PURE_ENV}
    code = ("import sys, pytest, roost.server\n"
            "from roost import _build\n"
            "assert not _build.compiled_modules(), _build.compiled_modules()\n"
            "sys.exit(pytest.main(sys.argv[1:]))\n")
    proc = subprocess.run(
        [sys.executable, "-c", code, "-q", "-p", "no:cacheprovider", *PURE_TESTS[group]],
        cwd=ROOT, env={**env, _build.PURE_ENV: "1"}, capture_output=True, text=True,
        timeout=110, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout


def test_the_server_imports_every_compiled_module_compiled() -> None:
    """What ``roost server`` imports: each module of the list as a C extension (none
    falls back to its source), whichever way it is reached."""
    if not REQUIRE and not _build.compiled_modules():
        pytest.skip("the pure build is installed here (no C compiler or Python headers)")
    out = _run(
        "import importlib, sys\n"
        "import roost.server, roost.cli\n"
        "from roost import _build\n"
        "for name in _build.COMPILED_MODULES:\n"
        "    mod = importlib.import_module(name)  # the STOMP modules load with a listener\n"
        "    print(name, type(mod.__spec__.loader).__name__, mod.__file__.rsplit('.', 1)[1])\n"
    )
    rows = [line.split() for line in out.splitlines()]
    assert [r[0] for r in rows] == list(_build.COMPILED_MODULES)
    assert all(r[1:] == ["ExtensionFileLoader", "so"] for r in rows), rows


@pytest.mark.parametrize("pure", [False, True])
def test_the_server_logs_which_build_runs(pure: bool, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != _build.PURE_ENV}
    if pure:
        env[_build.PURE_ENV] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "roost", "server", "--amqp-port", "0", "--http-port", "0",
         "--stomp-port", "0", "--ws-port", "0", "--data-dir", "none"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "Roost ready" in line:
                break
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    built = [line for line in lines if "roost.server: build: " in line]
    assert len(built) == 1, lines
    expected = "pure Python (ROOST_PURE_PYTHON=1)" if pure else _build.describe()
    assert built[0].rstrip().endswith(f"build: {expected}")


@pytest.mark.parametrize(
    ("env", "why"),
    [({"ROOST_PURE_PYTHON": "1"}, "ROOST_PURE_PYTHON=1"),
     ({"CC": "/nonexistent/cc"}, "no C compiler")],
)
def test_setup_installs_pure_python_when_it_cannot_compile(
    env: dict[str, str], why: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What setup.py hands setuptools: no extensions, and it says why on stderr."""
    given: dict[str, object] = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: given.update(kwargs))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runpy.run_path(str(ROOT / "setup.py"))
    assert "ext_modules" not in given
    assert f"roost: building pure Python ({why}" in capsys.readouterr().err


def test_an_installed_wheel_is_never_stale_but_an_edited_checkout_is(tmp_path: Path) -> None:
    """pip stamps a wheel's files with their unpacking time, so a compiled module's
    source can look newer than its extension; only a source tree is judged by times."""
    name = _build.COMPILED_MODULES[0]
    for top, expected in (("site-packages", []), ("src", [name])):
        source = (tmp_path / top).joinpath(*name.split(".")).with_suffix(".py")
        source.parent.mkdir(parents=True, exist_ok=True)
        built = source.with_name(source.stem + importlib.machinery.EXTENSION_SUFFIXES[0])
        built.write_bytes(b"")
        source.write_text("")
        os.utime(built, (1_000_000, 1_000_000))  # the extension older than its source
        assert _build.stale_extensions(tmp_path / top) == expected


def test_setup_skips_mypyc_when_pip_asks_only_for_metadata(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """pip runs setup.py for the build's requirements (egg_info) and its metadata (dist_info)
    before building: those runs hand setuptools no extensions and say nothing, the build
    says which build it makes, and its build_ext uses every core."""
    given: dict[str, object] = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: given.update(kwargs))
    monkeypatch.setenv(_build.PURE_ENV, "1")  # the build's line, without compiling here
    for argv in (["setup.py", "egg_info"], ["setup.py", "dist_info", "--output-dir", "x"]):
        monkeypatch.setattr(sys, "argv", argv)
        namespace = runpy.run_path(str(ROOT / "setup.py"))
        assert given == {} and capsys.readouterr().err == ""
    monkeypatch.setattr(sys, "argv", ["setup.py", "editable_wheel", "--dist-info-dir", "x"])
    runpy.run_path(str(ROOT / "setup.py"))
    assert capsys.readouterr().err == "roost: building pure Python (ROOST_PURE_PYTHON=1)\n"
    command = namespace["_OptionalBuildExt"](setuptools.Distribution())
    assert command.parallel is True


def test_one_extensions_c_files_compile_at_once_and_link_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With one C file per module, distutils would compile them one after the other: the
    build spreads one extension's files over the cores, each file one compile call, and
    hands the objects back in the order of the sources (the link order)."""
    monkeypatch.setattr(sys, "argv", ["setup.py", "egg_info"])  # load setup.py, build nothing
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    namespace = runpy.run_path(str(ROOT / "setup.py"))
    calls: list[list[str]] = []
    compiler = types.SimpleNamespace(
        compile=lambda sources, **kwargs: calls.append(sources) or [
            s.replace(".c", ".o") for s in sources
        ]
    )
    namespace["_compile_on_every_core"](compiler)
    sources = [f"m{i}.c" for i in range(7)]
    assert compiler.compile(sources, output_dir="build") == [f"m{i}.o" for i in range(7)]
    assert sorted(calls) == sorted([s] for s in sources)
