"""``load_definitions``: definitions applied at every start, before any listener opens.

As RabbitMQ's ``load_definitions`` (a file, or a directory whose ``*.json`` files are
imported in name order). The import is additive, as every definitions import. A bad
file stops the start with its name and the reason, and changes nothing: each document
is first imported into a scratch broker holding a copy of the broker's current
definitions, so a conflict found only while applying (a queue redeclared with other
arguments, a binding to a queue that exists nowhere) is found there, not half-way
through the real broker.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.core.errors import BrokerError

log = logging.getLogger("roost.definitions")


class DefinitionsError(ValueError):
    """A definitions file that cannot be applied; the message names the file."""


def read_documents(path: str) -> list[tuple[Path, dict[str, Any]]]:
    """The documents under ``path`` (a file, or a directory's ``*.json``), parsed."""
    where = Path(path)
    if where.is_dir():
        files = sorted(p for p in where.iterdir() if p.suffix == ".json" and p.is_file())
    elif where.is_file():
        files = [where]
    else:
        raise DefinitionsError(f"load_definitions: no file or directory '{path}'")
    documents = []
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise DefinitionsError(f"load_definitions: cannot read {file}: {exc}") from None
        except ValueError as exc:
            raise DefinitionsError(f"load_definitions: {file} is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise DefinitionsError(f"load_definitions: {file} is not a JSON object")
        documents.append((file, data))
    return documents


def load(broker: Any, path: str, scratch: Callable[[], Any]) -> int:
    """Check every document under ``path`` against ``scratch()`` (the management port of
    a fresh broker with no definitions) loaded with ``broker``'s own, then import them
    into ``broker`` (a management port). Returns the number of objects imported."""
    documents = read_documents(path)
    trial = scratch()
    trial.import_definitions(broker.export_definitions())
    for file, data in documents:
        try:
            trial.import_definitions(data)
        except (BrokerError, ValueError, KeyError, TypeError) as exc:
            reason = getattr(exc, "text", None) or str(exc)
            raise DefinitionsError(
                f"load_definitions: {file}: {reason} (nothing was applied)"
            ) from None
    total = 0
    for file, data in documents:
        report = broker.import_definitions(data)
        count = sum(report.counts.values())
        total += count
        log.info(
            "Imported %d definitions from %s (%s)",
            count,
            file,
            ", ".join(f"{n} {section}" for section, n in report.counts.items() if n),
        )
    return total
