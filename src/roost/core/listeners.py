"""Change listeners (``on_change`` of the broker and of each vhost).

Generic in the event's type (core/events.py's ``Event`` where it is called), so this
module, which the broker model calls, imports nothing of it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

E = TypeVar("E")


def tell_all(
    listeners: Iterable[Callable[[E], None]], event: E, log: logging.Logger, where: str = ""
) -> None:
    """Tell every listener, even when one fails: the change is made in memory, so the
    store's listener must hear of it too. The first failure is raised afterwards;
    each is logged (``where``: e.g. `` in vhost '/'``)."""
    failure: Exception | None = None
    for listener in listeners:
        try:
            listener(event)
        except Exception as exc:
            log.exception("applying a %s%s failed", type(event).__name__, where)
            failure = failure or exc
    if failure is not None:
        raise failure
