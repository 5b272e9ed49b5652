"""Change listeners (``on_change`` of the broker and of each vhost)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

Listener = Callable[[str, Any], None]


def tell_all(
    listeners: Iterable[Listener], kind: str, obj: Any, log: logging.Logger, where: str = ""
) -> None:
    """Tell every listener, even when one fails: the change is made in memory, so the
    store's listener must hear of it too. The first failure is raised afterwards;
    each is logged (``where``: e.g. `` in vhost '/'``)."""
    failure: Exception | None = None
    for listener in listeners:
        try:
            listener(kind, obj)
        except Exception as exc:
            log.exception("applying a %s change%s failed", kind, where)
            failure = failure or exc
    if failure is not None:
        raise failure
