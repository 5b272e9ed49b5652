"""asyncio plumbing for the stream protocol over TCP: the socket side is
``TcpPlumbing``'s (writes batched per turn of the loop, the loop as the session's clock,
reading paused when the session's ``ReadGate`` asks: a congested queue, an alarm, a
turn's share of work done, unconfirmed publishes, a pending definition change). The
protocol logic is ``StreamSession``; this adds the server's shutdown hooks."""

from __future__ import annotations

from typing import Any

from roost.core import AdapterPort
from roost.plumbing import TcpPlumbing
from roost.stream_protocol.session import StreamSession
from roost.stream_protocol.settings import StreamSettings


class StreamServerProtocol(TcpPlumbing[StreamSession]):
    def __init__(self, port: AdapterPort, settings: StreamSettings, registry: set[Any]) -> None:
        super().__init__()
        self.port = port
        self.settings = settings
        self.registry = registry

    def start(self) -> StreamSession:
        session = StreamSession(self.port, self.settings, self, self.clock)
        self.registry.add(self)
        return session

    def connection_lost(self, exc: Exception | None) -> None:
        self.registry.discard(self)
        super().connection_lost(exc)

    def writable_changed(self, writable: bool) -> None:
        if self.session is not None:
            for sub in self.session.commands.subscriptions.values():
                if sub.session is not None:
                    sub.session.set_writable(writable)

    def shutdown(self, reason: str = "shutdown") -> None:
        if self.session is not None:
            self.session.force_close(reason)

    def _abort(self, reason: str) -> None:
        """The server's last step of a shutdown: drop what is still open."""
        if self.session is not None:
            self.session.close_reason = self.session.close_reason or reason
            self.session.connection_lost()
        self.abort()
