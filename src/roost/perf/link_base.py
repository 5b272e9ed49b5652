"""What the STOMP and MQTT links of ``roost perf`` share (``perf/stomp.py``,
``perf/mqtt_codec.py``, ``perf/mqtt.py``): the future a link's loop waits on, why the
link ended, and opening a link. Each link adds its own connection and its protocol.
(``perf/amqp.py`` sits on ``roost.client``, which has all of this of its own.)
"""

from __future__ import annotations

import asyncio
from typing import Protocol, TypeVar


class LinkBase:
    """A link's state as perf's loops (``worker.py``) read it, and its wake-ups."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.error: BaseException | None = None
        self.server = ""  # the broker's product and version, where the protocol says
        self.connected: asyncio.Future[None] = self.loop.create_future()
        self._wake: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """Something changed (a read, a drain, an error): the waiting loop goes on."""
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def wait(self, timeout: float) -> None:
        self._wake = self.loop.create_future()
        await asyncio.wait([self._wake], timeout=timeout)

    def ended(
        self,
        exc: BaseException,
        *,
        record: bool = True,
        waiting: tuple[asyncio.Future[None], ...] = (),
    ) -> None:
        """The link ended with ``exc``: kept as ``error`` unless ``record`` is false (we
        closed it ourselves) or an earlier reason is kept; ``connected`` and the futures
        ``waiting`` fail with it (their exceptions marked retrieved), the loop wakes."""
        if record and self.error is None:
            self.error = exc
        for fut in (self.connected, *waiting):
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()
        self.wake()


class _Opens(Protocol):
    async def open(self) -> None: ...


class _Subscribes(_Opens, Protocol):
    async def subscribe(self) -> None: ...


P = TypeVar("P", bound=_Opens)
S = TypeVar("S", bound=_Subscribes)


async def opened(link: P) -> P:
    """A producer link, connected."""
    await link.open()
    return link


async def subscribed(link: S) -> S:
    """A consumer link, connected and subscribed."""
    await link.open()
    await link.subscribe()
    return link
