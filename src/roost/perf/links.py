"""What a protocol gives ``roost perf``: a producer link and a consumer link.

The loops in ``perf/worker.py`` know no protocol; they drive these two shapes, and
mypy checks that every protocol's links have them. ``perf/amqp.py`` and ``perf/stomp.py``
and ``perf/mqtt.py`` are the links built today. A new mode is one module with an
``open_producer(opts, slot)`` and an ``open_consumer(opts, slot)`` returning these, and
one entry in ``worker.ROLES``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from roost.client.confirms import ConfirmTracker
from roost.perf.options import Options
from roost.perf.stats import Tally


class Link(Protocol):
    """One open connection of one worker."""

    @property
    def error(self) -> BaseException | None:
        """Why the connection ended (None while it is up, or when we closed it)."""

    @property
    def paused(self) -> bool:
        """The transport's write buffer is full: a producer holds until it drains."""

    @property
    def server(self) -> str:
        """The broker's product and version, for the summary (may be empty)."""

    async def wait(self, timeout: float) -> None:
        """Return when anything changed (a read, a drain, an error) or after ``timeout``."""

    async def close(self, timeout: float = 2.0) -> None:
        """Close politely; the broker has handled everything sent before it returns."""


class ProducerLink(Link, Protocol):
    @property
    def message_bytes(self) -> int:
        """One message on the wire (sizes the batch written per loop turn)."""

    @property
    def settled(self) -> int:
        """Publishes the broker confirmed or refused (0 without a confirm window)."""

    @property
    def confirms(self) -> ConfirmTracker:
        """Acked and nacked counts, for the progress line."""

    def send(self, n: int, stamp: bytes) -> None:
        """Write ``n`` messages whose bodies start with ``stamp`` (empty: too small)."""

    def resize(self, size: int) -> None:
        """Bodies of ``size`` bytes from the next ``send`` on (``--variable-size``)."""


class ConsumerLink(Link, Protocol):
    @property
    def tally(self) -> Tally:
        """Counts and latencies; the link fills it as deliveries arrive."""

    def finish(self) -> None:
        """The run is over: stop counting and acknowledge what is owed."""


ProducerOpener = Callable[[Options, int], Coroutine[Any, Any, ProducerLink]]
ConsumerOpener = Callable[[Options, int], Coroutine[Any, Any, ConsumerLink]]
