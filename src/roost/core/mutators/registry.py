"""Finding mutators by name: the ``roost.mutators`` entry-point group, plus the
``ROOST_MUTATORS`` environment variable (``name=module:attr,...``) for code that is not
an installed distribution (tests, a script next to the broker)."""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from typing import Any

from roost.core.message import Message

log = logging.getLogger("roost.mutators")

GROUP = "roost.mutators"
ENV = "ROOST_MUTATORS"

Mutator = Callable[[Message, dict[str, Any]], Message | None]


class MutatorRegistry:
    """Name -> callable, loaded on first use and kept."""

    def __init__(self) -> None:
        self._loaded: dict[str, Mutator] = {}

    def get(self, name: str) -> Mutator:
        """The mutator called ``name``; KeyError (with the reason) when there is none."""
        found = self._loaded.get(name)
        if found is None:
            found = self._loaded[name] = self._load(name)
        return found

    def _load(self, name: str) -> Mutator:
        target = _from_env().get(name)
        if target is None:
            # imported here: importlib.metadata brings email, zipfile and csv with it,
            # about 1.5 MB of an idle broker that no mutator policy asks for
            from importlib.metadata import entry_points

            points = [ep for ep in entry_points(group=GROUP) if ep.name == name]
            if not points:
                raise KeyError(f"no mutator '{name}' (entry point group {GROUP} or ${ENV})")
            target = points[0].value
        module_name, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise KeyError(f"mutator '{name}' ({target}) cannot be loaded: {exc}") from None
        if not callable(obj):
            raise KeyError(f"mutator '{name}' ({target}) is not callable")
        return obj  # type: ignore[no-any-return]


def _from_env() -> dict[str, str]:
    out: dict[str, str] = {}
    for item in os.environ.get(ENV, "").split(","):
        name, sep, target = item.strip().partition("=")
        if sep and name and target:
            out[name.strip()] = target.strip()
    return out


registry = MutatorRegistry()
