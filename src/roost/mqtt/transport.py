"""What an MQTT session asks of its plumbing (mqtt/protocol.py, mqtt/ws.py, a test's
fake): the socket as an ``MQTTTransport``, time and timers as a ``Clock``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time and callbacks, handed in by the plumbing (the asyncio loop, or a test's)."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...


class MQTTTransport(Protocol):
    peer: str
    tls: bool
    # CN of the verified TLS client certificate, if any: a CONNECT without a user name
    # logs in as that user (RabbitMQ's mqtt.ssl_cert_login)
    cert_user: str | None

    def write(self, data: bytes) -> None: ...

    def close(self) -> None:
        """Flush what was written, then close."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...
