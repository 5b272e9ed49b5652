"""asyncio Protocol for STOMP over TCP: the socket side is ``TcpPlumbing``'s (batched
writes, the loop as clock); the STOMP logic lives in the sans-IO ``StompHandler``, which
returns what it does as effects (stomp/effects.py). They are carried out at each flush:
at the end of every read, and at the next loop turn when deliveries or timers made them
(``wake(False)``, the plumbing's ``flush_soon``), so the frames of a read or a turn still
leave in one ``transport.write``; a close, a pause or resume, a timer, or a big backlog
is carried out at once (``wake(True)``). The session's timers run on the loop
(``lifecycle.Timers``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from roost.core import AdapterPort
from roost.lifecycle import Timers
from roost.plumbing import TcpPlumbing
from roost.stomp.effects import apply
from roost.stomp.handler import StompHandler, StompSettings

log = logging.getLogger("roost.stomp")


class StompServerProtocol(TcpPlumbing[StompHandler]):
    def __init__(self, broker: AdapterPort, settings: StompSettings, registry: set[Any]) -> None:
        super().__init__()
        self.broker = broker
        self.settings = settings
        self.registry = registry
        self._timers = Timers(self.clock)  # the session's, by name

    def start(self) -> StompHandler:
        log.debug("%s: accepted STOMP connection", self.peer)
        return StompHandler(self.broker, self.settings, self, self.registry, clock=self.clock,
                            wake=self._wake)  # fmt: skip

    def writable_changed(self, writable: bool) -> None:
        if self.session is not None and self.session.session is not None:
            self.session.session.set_writable(writable)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._apply_effects()  # the CONNECT deadline the new session started

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._timers.cancel_all()

    def start_timer(self, name: str, delay: float) -> None:
        self._timers.set(name, delay, self._timer_fired, name)

    def stop_timer(self, name: str) -> None:
        self._timers.cancel(name)

    def _timer_fired(self, name: str) -> None:
        if self.session is not None:
            self.session.timer_fired(name)

    def _wake(self, now: bool) -> None:
        if now:
            self._apply_effects()
        else:
            self.flush_soon()

    def _apply_effects(self) -> None:
        session = self.session
        if session is not None and session.effects:
            apply(session.take_effects(), self)

    def _flush(self) -> int:
        self._apply_effects()
        return super()._flush()
