"""TCP keepalive on the listening sockets, so that the kernel finds dead peers.

A client that turned heartbeats off (AMQP heartbeat 0, STOMP ``heart-beat:0,0``) and then
vanished (power cut, a NAT or firewall that dropped the flow) leaves a half-open socket
that nothing else would ever reclaim: with SO_KEEPALIVE the kernel probes a connection
that was idle ``idle`` seconds, every ``interval`` seconds, and resets it after ``count``
unanswered probes; asyncio then reports it lost and the broker frees what it held.

Linux copies these options from a listening socket to every socket it accepts, so they
are set once per listener (AMQP, STOMP, WebSocket, HTTP, and the TLS ones). RabbitMQ's
equivalent is ``tcp_listen_options.keepalive`` with the kernel's timers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Keepalive:
    idle: int = 60  # seconds of silence before the first probe; 0 turns keepalive off
    interval: int = 10  # seconds between probes
    count: int = 6  # unanswered probes before the connection is reset

    def apply(self, sockets: Iterable[Any]) -> None:
        """Set the options on each socket (asyncio's, uvloop's or a plain one)."""
        for sock in sockets:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1 if self.idle else 0)
            if not self.idle:
                continue
            if hasattr(socket, "TCP_KEEPIDLE"):  # Linux; macOS has TCP_KEEPALIVE instead
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, self.idle)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, self.interval)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, self.count)
