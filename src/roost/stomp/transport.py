"""What the sans-IO STOMP session is handed by its plumbing (stomp/protocol.py,
stomp/ws.py): who the peer is, and a clock for time and timers. Writing, closing and
pausing are effects the session returns (stomp/effects.py)."""

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


class Endpoint(Protocol):
    """Who the peer is, as the plumbing (TCP or WebSocket) knows it. What the session
    does to the connection it returns as effects (stomp/effects.py)."""

    peer: str
    # CN of the verified TLS client certificate, if any: a CONNECT without login logs in
    # as that user (RabbitMQ's stomp.ssl_cert_login)
    cert_user: str | None
    tls: bool
