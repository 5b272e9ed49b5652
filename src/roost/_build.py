"""Which build of Roost runs: the hot-path modules compiled with mypyc, or pure Python.

``setup.py`` compiles the modules in ``COMPILED_MODULES`` to C extensions when a C
compiler and the Python headers are there (docs/compiled.md); the same ``.py`` files stay
beside them as the fallback. ``ROOST_PURE_PYTHON=1`` at build time skips the compilation;
at run time it makes this process import the ``.py`` sources even where the extensions
are built (``choose``, called by ``roost/__init__.py``), which is how the tests
run both builds from one checkout.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# Kept in step with setup.py's list (tests/unit/test_build.py checks): the modules every
# message touches whose compilation pays (bench/amqp_cpu.py, bench/stomp_cpu.py).
COMPILED_MODULES: tuple[str, ...] = (
    "roost.amqp.codec",
    "roost.amqp.frames",
    "roost.amqp.field_table",
    "roost.amqp.content_properties",
    "roost.amqp.frame_encoders",
    "roost.amqp.codec_methods",
    "roost.amqp.connection",
    "roost.amqp.connection_events",
    "roost.stomp.frames",
    "roost.stomp.frame_encoding",
    "roost.amqp.session",
    "roost.amqp.handlers",
    "roost.amqp.channel_context",
    "roost.amqp.definitions",
    "roost.amqp.properties",
    "roost.lifecycle",
    "roost.core.message",
    "roost.core.messaging",
    "roost.core.session",
    "roost.core.delivery_sink",
    "roost.core.vhost",
    "roost.core.router",
    "roost.core.equivalence",
    "roost.stomp.handler",
    "roost.stomp.error_names",
    "roost.stomp.output",
    "roost.stomp.sending",
    "roost.stomp.subscribing",
    "roost.stomp.delivering",
    "roost.stomp.transactions",
    "roost.stomp.heartbeats",
    "roost.stomp.session_state",
    "roost.stomp.mapping",
    "roost.stomp.effects",
    "roost.core.flow",
    "roost.core.latency",
    "roost.core.access",
    "roost.core.queues.message_path",
    "roost.core.queues.entry",
    "roost.core.exchanges.base",
    "roost.core.exchanges.default",
    "roost.core.client",
    "roost.codecs.properties",
    "roost.codecs.stream_message",
    "roost.store.stream_reader",
    "roost.store.stream_chunk",
    "roost.stream_protocol.chunk_mapping",
    "roost.core.queues.stream_delivery",
    "roost.amqp.held",
    "roost.amqp.channel",
    "roost.backpressure",
    "roost.write_batch",
    "roost.core.queues.paged",
)
PURE_ENV = "ROOST_PURE_PYTHON"


def pure_requested() -> bool:
    """Whether ``ROOST_PURE_PYTHON=1`` asks for the pure-Python modules."""
    return os.environ.get(PURE_ENV, "") == "1"


class _SourceFirst:
    """A meta-path finder that loads the modules of ``COMPILED_MODULES`` from their
    ``.py`` sources (installed only when the pure build is wanted or needed)."""

    @classmethod
    def find_spec(
        cls, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in COMPILED_MODULES:
            return None
        leaf = name.rpartition(".")[2] + ".py"
        for entry in path if path is not None else sys.path:
            source = Path(entry) / leaf
            if source.is_file():
                return importlib.util.spec_from_file_location(name, source)
        return None


def stale_extensions(root: Path | None = None) -> list[str]:
    """The compiled modules whose extension is older than its ``.py`` (an editable
    install whose source was edited since it was built). ``root`` holds ``roost/``."""
    root = root or Path(__file__).resolve().parent.parent
    if root.name in ("site-packages", "dist-packages"):
        # installed from a wheel: pip gives each file its unpacking time, so a source
        # unpacked after its extension looks newer although both came from one build
        return []
    stale = []
    for name in COMPILED_MODULES:
        source = root.joinpath(*name.split(".")).with_suffix(".py")
        built = [source.with_name(source.stem + suffix)
                 for suffix in importlib.machinery.EXTENSION_SUFFIXES]
        times = [b.stat().st_mtime for b in built if b.is_file()]
        if times and source.is_file() and max(times) < source.stat().st_mtime:
            stale.append(name)
    return stale


_why_source = ""


def choose() -> None:
    """Called by ``roost/__init__.py`` before any compiled module is imported: the pure
    sources of all of them under ``ROOST_PURE_PYTHON=1``, or when any extension is stale
    (mypyc links the modules of one build together, so they go as one)."""
    global _why_source
    if pure_requested():
        _why_source = f"{PURE_ENV}=1"
    elif stale := stale_extensions():
        _why_source = (f"the extension of {', '.join(stale)} is older than its source: "
                       "pip install -e . rebuilds it")
    if _why_source and _SourceFirst not in sys.meta_path:
        sys.meta_path.insert(0, _SourceFirst)


def compiled_modules() -> list[str]:
    """The modules of ``COMPILED_MODULES`` that this process imports as C extensions."""
    found = []
    for name in COMPILED_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            found.append(name)
    return found


def describe() -> str:
    """One line for ``roost --version`` and the server's start: which build runs."""
    compiled = compiled_modules()
    if len(compiled) == len(COMPILED_MODULES):
        return f"compiled (mypyc: {len(compiled)} hot-path modules)"
    if compiled:
        missing = sorted(set(COMPILED_MODULES) - set(compiled))
        return f"partly compiled (mypyc; pure Python: {', '.join(missing)})"
    why = _why_source or "no compiled modules built"
    return f"pure Python ({why})"
