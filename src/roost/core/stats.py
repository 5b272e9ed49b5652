"""Lifetime counters and the rate sampler behind the management API's message rates.

The hot path only ever adds to integers (queues' ``stat_*``, exchanges' ``stat_in/out``,
connections' ``Traffic``). Rates are computed away from it: every few seconds the broker
takes a sample of those counters, and a rate is the difference between the last two
samples divided by the time between them, as RabbitMQ's ``*_details.rate`` is.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from roost.core.events import Event, ExchangeDeleted, QueueDeclared, QueueDeleted, VHostChanged
from roost.core.info import NO_RATES, Rates, Sample
from roost.core.latency import Latency

if TYPE_CHECKING:
    from roost.core.client import ClientCounts


class Counters:
    """Broker-wide churn counts, and what deleted objects had counted before they went."""

    __slots__ = (
        "channel_closed",
        "channel_created",
        "connection_closed",
        "connection_created",
        "protocol_errors",
        "queue_created",
        "queue_declared",
        "queue_deleted",
        "retired_acked",
        "retired_counts",
        "retired_delivered",
        "retired_published_in",
        "retired_published_out",
        "retired_recv_oct",
        "retired_redelivered",
        "retired_send_oct",
    )
    channel_closed: int
    channel_created: int
    connection_closed: int
    connection_created: int
    queue_created: int
    queue_declared: int
    queue_deleted: int
    retired_acked: int
    retired_delivered: int
    retired_published_in: int
    retired_published_out: int
    retired_recv_oct: int
    retired_redelivered: int
    retired_send_oct: int
    retired_counts: dict[str, ClientCounts]  # closed connections' counts, per protocol
    # error answers a protocol gave, by (protocol label, error name): the stream
    # protocol's response codes (rabbitmq_global_stream_error_*_total)
    protocol_errors: dict[tuple[str, str], int]

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)
        self.retired_counts = {}
        self.protocol_errors = {}

    def count_protocol_error(self, protocol: str, name: str, n: int = 1) -> None:
        key = (protocol, name)
        self.protocol_errors[key] = self.protocol_errors.get(key, 0) + n


class RateSampler:
    """Keeps the previous sample of each object's counters and the rates derived from it.

    ``observe`` is called for every live object during one sampling pass, between
    ``begin`` and ``end``; objects that were not observed are forgotten at ``end``.
    """

    def __init__(self, history: int = 120) -> None:
        self._previous: dict[Hashable, tuple[float, Sequence[float]]] = {}
        self._seen: dict[Hashable, tuple[float, Sequence[float]]] = {}
        self._rates: dict[Hashable, Rates] = {}
        self._fresh: dict[Hashable, Rates] = {}
        self.history: dict[str, deque[Sample]] = {}
        self.history_length = history
        self.now = 0.0
        self.samples_taken = 0

    def begin(self, now: float) -> None:
        self.now = now
        self._seen = {}
        self._fresh = {}

    def observe(self, key: Hashable, names: Sequence[str], values: Sequence[float]) -> Rates:
        """Record ``values`` for ``key``; returns the rates since its previous sample."""
        now = self.now
        self._seen[key] = (now, values)
        before = self._previous.get(key)
        if before is None or now <= before[0]:
            rates = NO_RATES
        else:
            elapsed = now - before[0]
            # a counter that went down belongs to a new object of the same name: no rate
            rates = Rates(
                {
                    name: round(max(0.0, (value - old) / elapsed), 2)
                    for name, value, old in zip(names, values, before[1], strict=True)
                }
            )
        self._fresh[key] = rates
        return rates

    def record(self, name: str, value: float) -> None:
        """Append a point to a named history (overview charts)."""
        points = self.history.get(name)
        if points is None:
            points = self.history[name] = deque(maxlen=self.history_length)
        points.append(Sample(int(self.now * 1000), value))

    def end(self) -> None:
        self._previous = self._seen
        self._rates = self._fresh
        self.samples_taken += 1

    def rates(self, key: Hashable) -> Rates:
        return self._rates.get(key, NO_RATES)

    def recent(self, name: str, age_seconds: float) -> tuple[Sample, ...]:
        points = self.history.get(name)
        if not points:
            return ()
        cutoff = (self.now - age_seconds) * 1000
        return tuple(p for p in points if p.timestamp >= cutoff)


class Stats:
    """The broker's lifetime counters and its rate sampler. It follows the definitions
    (``on_catalog_change``): created and deleted queues are counted, and what a deleted
    queue or exchange had counted is kept, so overview totals never go down. Sampling
    every live object into rates is the management side's job (core/activity.py)."""

    def __init__(self, latency_sample: int = 0) -> None:
        self.counters = Counters()
        self.sampler = RateSampler()
        # publish-to-deliver and publish-to-confirm histograms (core/latency.py)
        self.latency = Latency(latency_sample) if latency_sample > 0 else None

    def on_catalog_change(self, event: Event) -> None:
        if isinstance(event, VHostChanged) and self._on_vhost_change not in event.vhost.on_change:
            event.vhost.on_change.append(self._on_vhost_change)

    def _on_vhost_change(self, event: Event) -> None:
        c = self.counters
        match event:
            case QueueDeclared():
                c.queue_created += 1
            case QueueDeleted(queue=q):
                c.queue_deleted += 1
                c.retired_delivered += q.stat_delivered
                c.retired_acked += q.stat_acked
                c.retired_redelivered += q.stat_redelivered
            case ExchangeDeleted(exchange=ex):
                c.retired_published_in += ex.stat_in
                c.retired_published_out += ex.stat_out
