"""asyncio Protocol for MQTT over TCP (and TLS): the socket side is ``TcpPlumbing``'s
(writes batched per loop iteration, reading paused by the ReadGate, the loop as clock);
the MQTT logic is ``MQTTSession``'s, shared with the WebSocket endpoint."""

from __future__ import annotations

from typing import Any

from roost.core import AdapterPort
from roost.mqtt.retained import MQTTState
from roost.mqtt.session import MQTTSession, MQTTSettings
from roost.plumbing import TcpPlumbing


class MQTTServerProtocol(TcpPlumbing[MQTTSession]):
    def __init__(
        self, port: AdapterPort, settings: MQTTSettings, state: MQTTState, registry: set[Any]
    ) -> None:
        super().__init__()
        self.port = port
        self.settings = settings
        self.state = state
        self.registry = registry

    def start(self) -> MQTTSession:
        return MQTTSession(
            self.port, self.settings, self, self.state, self.registry, clock=self.clock
        )

    def writable_changed(self, writable: bool) -> None:
        core = self.session.session if self.session is not None else None
        if core is not None:
            core.set_writable(writable)
