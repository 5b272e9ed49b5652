"""asyncio Protocol for STOMP over TCP: the socket side is ``TcpPlumbing``'s (batched
writes, reading paused by the ReadGate, the loop as clock); the STOMP logic lives in
``StompHandler`` so the WebSocket endpoint shares it."""

from __future__ import annotations

import logging
from typing import Any

from roost.core import AdapterPort
from roost.plumbing import TcpPlumbing
from roost.stomp.handler import StompHandler, StompSettings

log = logging.getLogger("roost.stomp")


class StompServerProtocol(TcpPlumbing[StompHandler]):
    def __init__(self, broker: AdapterPort, settings: StompSettings, registry: set[Any]) -> None:
        super().__init__()
        self.broker = broker
        self.settings = settings
        self.registry = registry

    def start(self) -> StompHandler:
        log.debug("%s: accepted STOMP connection", self.peer)
        return StompHandler(self.broker, self.settings, self, self.registry, clock=self.clock)

    def writable_changed(self, writable: bool) -> None:
        if self.session is not None and self.session.session is not None:
            self.session.session.set_writable(writable)
