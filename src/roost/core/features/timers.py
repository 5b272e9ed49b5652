"""Timers for the core: the running event loop's, when there is one.

The core stays synchronous; a queue feature that needs to act later (a message expiring
at the head, an unused queue expiring) asks for a callback here. Without a running loop
(unit tests driving the core directly) nothing is scheduled and the checks made on every
dispatch still apply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


def call_later(delay: float, callback: Callable[[], None]) -> asyncio.TimerHandle | None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.call_later(max(delay, 0.0), callback)


def call_soon(callback: Callable[[], None]) -> asyncio.Handle | None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.call_soon(callback)
