"""Optional StatsD push (``--statsd HOST:PORT``): the counters /metrics shows, as UDP
datagrams after every rate sample. Gauges go as ``|g``; lifetime counters as ``|c``
deltas since the previous push, which is what StatsD expects of a counter."""

from __future__ import annotations

import asyncio
import logging
import re

from roost.core.ports.management import ManagementPort

log = logging.getLogger("roost.statsd")
MAX_DATAGRAM = 1400  # stay under a typical MTU: StatsD servers read one datagram at a time


def _name(part: str) -> str:
    """StatsD names are dot-separated: keep each part to letters, digits, '-' and '_'."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", part) or "_"


class StatsdPusher:
    def __init__(self, host: str, port: int, prefix: str) -> None:
        self.host, self.port, self.prefix = host, port, prefix
        self._transport: asyncio.DatagramTransport | None = None
        self._previous: dict[str, int] = {}

    @classmethod
    def from_setting(cls, setting: str | None, prefix: str) -> StatsdPusher | None:
        if not setting:
            return None
        host, _, port = setting.rpartition(":")
        return cls(host or "127.0.0.1", int(port), prefix)

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, remote_addr=(self.host, self.port)
        )
        log.info("pushing statistics to StatsD at %s:%d", self.host, self.port)

    def lines(self, broker: ManagementPort) -> list[str]:
        p = self.prefix
        out: list[str] = []
        counters: dict[str, int] = {}
        info = broker.activity.overview()
        for key, value in info.object_totals.items():
            out.append(f"{p}.{key}:{value}|g")
        out.append(f"{p}.messages_ready:{info.messages.ready}|g")
        out.append(f"{p}.messages_unacknowledged:{info.messages.unacknowledged}|g")
        t = info.totals
        counters.update(
            {
                f"{p}.published": t.published,
                f"{p}.delivered": t.delivered,
                f"{p}.acked": t.acked,
                f"{p}.redelivered": t.redelivered,
                f"{p}.bytes_in": t.recv_oct,
                f"{p}.bytes_out": t.send_oct,
            }
        )
        out.append(f"{p}.memory:{info.node.mem_used}|g")
        for q in broker.queries.list_queues():
            base = f"{p}.queue.{_name(q.vhost)}.{_name(q.name)}"
            out.append(f"{base}.messages_ready:{q.messages.ready}|g")
            out.append(f"{base}.messages_unacknowledged:{q.messages.unacknowledged}|g")
            out.append(f"{base}.consumers:{q.consumers}|g")
            counters[f"{base}.published"] = q.published
            counters[f"{base}.delivered"] = q.delivered
            counters[f"{base}.acked"] = q.acked
            counters[f"{base}.redelivered"] = q.redelivered
        for name, value in counters.items():
            delta = value - self._previous.get(name, 0)
            if delta > 0:
                out.append(f"{name}:{delta}|c")
        self._previous = counters
        return out

    def push(self, broker: ManagementPort) -> None:
        if self._transport is None:
            return
        packet: list[str] = []
        size = 0
        for line in self.lines(broker):
            if packet and size + len(line) + 1 > MAX_DATAGRAM:
                self._transport.sendto("\n".join(packet).encode())
                packet, size = [], 0
            packet.append(line)
            size += len(line) + 1
        if packet:
            self._transport.sendto("\n".join(packet).encode())

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
