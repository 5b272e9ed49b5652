"""What a stream-protocol session is handed: its listener's settings (made by the server
from its configuration), and the transport and clock the plumbing gives it (the session
itself does no I/O: roost/plumbing.py, ``protocol.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from roost.stream_protocol import constants as c


class Transport(Protocol):
    peer: str
    tls: bool
    cert_user: str | None

    def write(self, data: bytes | memoryview) -> None: ...
    def close(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def time(self) -> float: ...
    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...
    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...


@dataclass(frozen=True)
class StreamSettings:
    frame_max: int = c.DEFAULT_FRAME_MAX
    heartbeat: int = c.DEFAULT_HEARTBEAT
    advertised_host: str = "localhost"
    advertised_port: int = 5552
    # RabbitMQ's publishing credits (rabbitmq_stream initial_credits 50000, unblocked
    # with credits_required_for_unblocking 12500 back): past ``max_unconfirmed``
    # publishes awaiting confirms a connection is read no further, until no more than
    # ``max_unconfirmed - unblock_credits`` await them. Confirms wait for the fsync: a
    # smaller window (10,000 and 5,000 before) left rstream's producer waiting on it
    # (bench/stream_protocol_bench.py: docs/stream-protocol.md)
    max_unconfirmed: int = 50_000
    unblock_credits: int = 12_500
