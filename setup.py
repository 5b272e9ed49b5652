"""Build Roost: the hot-path modules compiled with mypyc where a C compiler and the Python
headers are present, pure Python where they are not (docs/compiled.md).

Everything else about the package is in pyproject.toml. ``ROOST_PURE_PYTHON=1`` skips the
compilation. A compilation that fails (no compiler, a broken toolchain) installs the pure
build with a warning instead of failing the install: the ``.py`` sources are always there.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

# Kept in step with roost/_build.py's COMPILED_MODULES (tests/unit/test_build.py checks).
COMPILED = [
    "src/roost/amqp/codec.py",
    "src/roost/amqp/frames.py",
    "src/roost/amqp/field_table.py",
    "src/roost/amqp/content_properties.py",
    "src/roost/amqp/frame_encoders.py",
    "src/roost/amqp/codec_methods.py",
    "src/roost/amqp/connection.py",
    "src/roost/amqp/connection_events.py",
    "src/roost/stomp/frames.py",
    "src/roost/stomp/frame_encoding.py",
    "src/roost/amqp/session.py",
    "src/roost/amqp/handlers.py",
    "src/roost/amqp/channel_context.py",
    "src/roost/amqp/definitions.py",
    "src/roost/amqp/properties.py",
    "src/roost/lifecycle.py",
    "src/roost/core/message.py",
    "src/roost/core/messaging.py",
    "src/roost/core/session.py",
    "src/roost/core/delivery_sink.py",
    "src/roost/core/vhost.py",
    "src/roost/core/router.py",
    "src/roost/core/equivalence.py",
    "src/roost/stomp/handler.py",
    "src/roost/stomp/error_names.py",
    "src/roost/stomp/output.py",
    "src/roost/stomp/sending.py",
    "src/roost/stomp/subscribing.py",
    "src/roost/stomp/delivering.py",
    "src/roost/stomp/transactions.py",
    "src/roost/stomp/heartbeats.py",
    "src/roost/stomp/session_state.py",
    "src/roost/stomp/mapping.py",
    "src/roost/stomp/effects.py",
    "src/roost/core/flow.py",
    "src/roost/core/latency.py",
    "src/roost/core/access.py",
    "src/roost/core/queues/message_path.py",
    "src/roost/core/queues/entry.py",
    "src/roost/core/exchanges/base.py",
    "src/roost/core/exchanges/default.py",
    "src/roost/core/client.py",
    "src/roost/codecs/properties.py",
    "src/roost/codecs/stream_message.py",
    "src/roost/store/stream_reader.py",
    "src/roost/store/stream_chunk.py",
    "src/roost/stream_protocol/chunk_mapping.py",
    "src/roost/core/queues/stream_delivery.py",
    "src/roost/amqp/held.py",
    "src/roost/amqp/channel.py",
    "src/roost/backpressure.py",
    "src/roost/write_batch.py",
    "src/roost/core/queues/paged.py",
]


# pip runs this file three times for one install: for the build's requirements (egg_info),
# for its metadata (dist_info), then to build it. Only the build needs the extensions, and
# mypyc type-checks the modules and writes their C each time it is asked (docs/compiled.md,
# "Build time"), so the first two runs skip it.
_METADATA_ONLY = {"egg_info", "dist_info"}
_BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop",
           "sdist", "bdist_egg"}


def _metadata_only(argv: list[str]) -> bool:
    """Whether setuptools was asked only for metadata, which compiling does not change."""
    given = set(argv[1:])
    return bool(given & _METADATA_ONLY) and not given & _BUILDS


def _why_pure() -> str | None:
    """Why this machine gets the pure build, or None when it can compile."""
    if os.environ.get("ROOST_PURE_PYTHON", "") == "1":
        return "ROOST_PURE_PYTHON=1"
    if platform.python_implementation() != "CPython":
        return f"mypyc compiles for CPython, not {platform.python_implementation()}"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python headers (Debian: python3-dev)"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(os.environ.get("CC", compiler).split()[0]) is None:
        return f"no C compiler ({compiler})"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed in the build environment"
    return None


class _OptionalBuildExt(build_ext):
    """Compile the extensions; when that fails, build none of them (the pure build)."""

    def initialize_options(self) -> None:
        super().initialize_options()
        # every core: gcc builds the one large shared library while the others build the
        # small per-module extensions (`-j N` on the command line still wins)
        self.parallel = True

    def build_extensions(self) -> None:
        _compile_on_every_core(self.compiler)
        super().build_extensions()

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # a compiler error, a missing tool: the sources remain
            for output in self.get_outputs():
                Path(output).unlink(missing_ok=True)
            self.extensions = []
            print(f"roost: compiling with mypyc failed ({exc}); installing pure Python",
                  file=sys.stderr)

    def get_outputs(self) -> list[str]:
        return super().get_outputs() if self.extensions else []


def _compile_on_every_core(compiler: Any) -> None:
    """distutils compiles one extension's C files one after the other: with one file per
    module (MULTI_FILE), compile them on every core instead."""
    serial = compiler.compile

    def compile(sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
        if len(sources) < 2:
            return serial(sources, *args, **kwargs)
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            parts = pool.map(lambda source: serial([source], *args, **kwargs), sources)
            return [obj for part in parts for obj in part]

    compiler.compile = compile


# how mypyc writes and gcc compiles the C (docs/compiled.md, "Build time"); the environment
# variables are for measuring the alternatives
OPT_LEVEL = os.environ.get("ROOST_MYPYC_OPT_LEVEL", "3")
MULTI_FILE = os.environ.get("ROOST_MYPYC_MULTI_FILE", "1") == "1"


def _extensions() -> dict[str, Any]:
    if _metadata_only(sys.argv):
        return {}
    why = _why_pure()
    if why is not None:
        print(f"roost: building pure Python ({why})", file=sys.stderr)
        return {}
    from mypyc.build import mypycify

    print(f"roost: compiling {len(COMPILED)} modules with mypyc", file=sys.stderr)
    started = time.monotonic()
    try:
        # group_name: the one shared library of the compiled modules is roost__mypyc
        # the build environment holds mypy but not Roost's dependencies (pip installs them
        # after building): what the compiled modules import from them is typed Any here;
        # strictness is mypy's job in the tests, not the compiler's
        options = ["--config-file", os.devnull, "--ignore-missing-imports"]
        modules = mypycify([*options, *COMPILED], opt_level=OPT_LEVEL, debug_level="0",
                           multi_file=MULTI_FILE, group_name="roost")
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error it cannot compile
        print(f"roost: mypyc refused the sources ({exc!r}); installing pure Python",
              file=sys.stderr)
        return {}
    print(f"roost: mypyc wrote their C in {time.monotonic() - started:.0f} s "
          f"(-O{OPT_LEVEL}, {'one file per module' if MULTI_FILE else 'one file'}); "
          f"gcc builds it with {os.cpu_count()} jobs", file=sys.stderr)
    return {"ext_modules": modules, "cmdclass": {"build_ext": _OptionalBuildExt}}


setup(**_extensions())
