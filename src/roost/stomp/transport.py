"""What the sans-IO STOMP session asks of its plumbing (stomp/protocol.py, stomp/ws.py):
a transport to write to, close and pause, and a clock for time and timers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...

    def cancelled(self) -> bool: ...


class Clock(Protocol):
    """Time and callbacks, handed in by the plumbing (the asyncio loop is one; a test's
    fake clock is another): the session itself does no I/O and owns no event loop."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...


class StompTransport(Protocol):
    """What the handler needs from TCP or WebSocket."""

    peer: str
    # CN of the verified TLS client certificate, if any: a CONNECT without login logs in
    # as that user (RabbitMQ's stomp.ssl_cert_login)
    cert_user: str | None
    tls: bool

    def write(self, data: bytes) -> None: ...

    def close(self, *, going_away: bool = False) -> None:
        """Flush what was written, then close; ``going_away`` when the server is stopping
        (WebSocket close code 1001)."""

    def abort(self) -> None: ...

    def pause_reading(self) -> None:
        """Read no more input until ``resume_reading`` (roost/backpressure.py)."""

    def resume_reading(self) -> None: ...
