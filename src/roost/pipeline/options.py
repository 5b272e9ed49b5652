"""The data source's options as Spark hands them over (case-insensitive), and what the
driver asks the broker before any task runs: a stream's offsets and times, the
write target."""

from __future__ import annotations

import math
from typing import Any

from roost.pipeline.amqp import Client, RoostError, missing_as
from roost.pipeline.bounds import resolve_offset, time_ms
from roost.pipeline.failover import DEFAULT_TIMEOUT, Nodes


class _Options:
    def __init__(self, options: dict[str, str]) -> None:
        # Spark hands options over case-insensitively (lower-cased keys)
        self.options = {k.lower(): v for k, v in options.items()}
        self.url = self.get("url") or ""
        if not self.url:
            raise RoostError("option 'url' is required (amqp://user:pass@host:port/vhost)")
        self.stream = self.get("stream") or ""
        self.parts = int(self.get("numPartitions") or "2")
        self.failover_timeout = float(self.get("failoverTimeout") or DEFAULT_TIMEOUT)

    def nodes(self) -> Nodes:
        """The node list (option ``url``) with a fresh failover budget."""
        return Nodes(self.url, self.failover_timeout)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.options.get(key.lower(), default)

    def info(self) -> dict[str, Any]:
        return self.nodes().run(self._info)

    def _info(self, client: Client) -> dict[str, Any]:
        if not self.stream:
            raise RoostError("option 'stream' is required")
        with missing_as(f"no stream '{self.stream}' on the broker"):
            return client.stream_info(self.stream)

    def offsets(self, defaults: dict[str, str]) -> list[int]:
        """One offset per end asked for ("starting", "ending": its default offset spec),
        from that end's Offsets or Timestamp option: one offset query, plus one round trip
        when a timestamp is given."""
        times: dict[str, int] = {}
        for kind in defaults:
            stamp = self.get(f"{kind}Timestamp")
            if stamp is None:
                continue
            if self.get(f"{kind}Offsets") is not None:
                raise RoostError(f"set {kind}Offsets or {kind}Timestamp, not both")
            times[kind] = math.floor(time_ms(stamp))

        def ask(client: Client) -> tuple[dict[str, Any], list[int]]:
            info = self._info(client)
            by_time = (
                client.offsets_for_times(self.stream, info, list(times.values())) if times else []
            )
            return info, by_time

        info, by_time = self.nodes().run(ask)
        found = dict(zip(times, by_time, strict=True))
        return [
            found[kind]
            if kind in found
            else resolve_offset(self.get(f"{kind}Offsets") or default, info)
            for kind, default in defaults.items()
        ]

    def check_target(self) -> bool:
        """Fail on the driver, before any task runs, when the exchange, or (default
        exchange) the queue named by routingKey or stream, does not exist. True when
        rows can go as batched publishes: the target is that queue and a stream."""
        exchange = self.get("exchange") or ""
        queue = "" if exchange else (self.get("routingKey") or self.stream)
        with Client(self.url) as client:
            with missing_as(f"no exchange '{exchange}' to write to"):
                client.check_exchange(exchange)
            if not queue:
                return False  # rows name their queue (routing_key column): mandatory checks
            with missing_as(f"no stream or queue '{queue}' to write to"):
                client.check_queue(queue)
            return client.is_stream(queue)
