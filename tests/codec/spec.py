"""The spec as the generator reads it, for tests that need argument types."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_amqp", REPO / "tools" / "gen_amqp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_amqp"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gen = load_generator()
_SPEC_PATH = REPO / gen.DEFAULT_SPEC
# The spec lives in the shared folder beside the repository (as scripts/test expects);
# only the tests comparing the generated code with it need it.
requires_spec = pytest.mark.skipif(not _SPEC_PATH.exists(), reason=f"{_SPEC_PATH} not here")


def load_spec() -> tuple:
    """(constants, method specs, property specs) as the generator reads them."""
    return gen.load(json.loads(_SPEC_PATH.read_text()))
