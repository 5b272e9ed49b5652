"""A STOMP listener's settings, shared by its sessions."""

from __future__ import annotations

from dataclasses import dataclass, field

from roost.stomp.frames import Limits


@dataclass(frozen=True)
class StompSettings:
    limits: Limits = field(default_factory=Limits)
    heartbeat_ms: int = 1000  # the smallest interval the server offers to send/expect
    connect_timeout: float = 10.0
    default_user: str = "guest"
    default_passcode: str = "guest"
