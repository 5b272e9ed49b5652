"""asyncio plumbing for AMQP 0-9-1 over TCP (and TLS): the socket side is
``TcpPlumbing``'s (what a read produces goes out in one ``transport.write``, output
made outside a read once per loop iteration, reading paused by the ReadGate, the loop as
clock); the AMQP logic is ``AMQPSession``'s (amqp/session.py). Two things are AMQP's
own: a flush first lets the channels add their pending publisher confirms to the batch
(so the confirms of a whole read leave in its one write), and the bytes and writes sent
are counted for the management API."""

from __future__ import annotations

from typing import Any

from roost.amqp.handshake import AMQPLimits
from roost.amqp.session import AMQPSession
from roost.core import AdapterPort
from roost.plumbing import TcpPlumbing

__all__ = ["AMQPLimits", "AMQPServerProtocol"]


class AMQPServerProtocol(TcpPlumbing[AMQPSession]):
    def __init__(self, broker: AdapterPort, limits: AMQPLimits, registry: set[Any]) -> None:
        super().__init__()
        self.broker = broker
        self.limits = limits
        self.registry = registry

    def start(self) -> AMQPSession:
        return AMQPSession(self.broker, self.limits, self, self.registry, self.clock)

    def writable_changed(self, writable: bool) -> None:
        if self.session is not None:
            self.session.set_writable(writable)

    def _flush(self) -> int:
        session = self.session
        if session is not None and session.confirm_channels:
            session.send_confirms()
        sent = super()._flush()
        if sent and session is not None:
            traffic = session.traffic
            traffic.send_oct += sent
            traffic.send_cnt += 1
        return sent
