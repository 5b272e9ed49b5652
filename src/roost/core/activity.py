"""Live activity: connections, channels, consumers, totals, rates, alarms and the node.

Part of the management port (core/ports/management.py), next to ``core.queries``
(definitions-side queries). ``sample_rates`` is the one periodic job: every few seconds
it turns the lifetime counters into per-second rates (see ``core.stats``).
"""

from __future__ import annotations

import os
import platform
import resource
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from roost import __version__
from roost.core.alarms import DISK, MEMORY, ResourceAlarms, rss_bytes
from roost.core.alarms import disk_free as disk_free_bytes
from roost.core.connections import channel_info, connection_info
from roost.core.exchanges import EXCHANGE_TYPES
from roost.core.info import (
    ChannelInfo,
    Churn,
    ConnectionInfo,
    ConsumerInfo,
    HistogramInfo,
    LatencyInfo,
    ListenerInfo,
    MemberInfo,
    MessageCounts,
    MutatorTotals,
    NodeInfo,
    OverviewInfo,
    ProtocolTotals,
    StoreInfo,
    Totals,
)
from roost.core.latency import BOUNDS, Histogram
from roost.core.mutators import stats as mutator_stats
from roost.core.protocol_totals import protocol_totals
from roost.core.queries import message_counts

if TYPE_CHECKING:

    from roost.core.catalog import Catalog
    from roost.core.connections import Connections
    from roost.core.durability import MessageStore
    from roost.core.queues.base import Queue
    from roost.core.settings import BrokerSettings
    from roost.core.stats import Stats

QUEUE_COUNTERS = (
    "publish",
    "deliver_get",
    "ack",
    "redeliver",
    "messages",
    "messages_ready",
    "messages_unacknowledged",
)
EXCHANGE_COUNTERS = ("publish_in", "publish_out")
CONNECTION_COUNTERS = ("recv_oct", "send_oct")
OVERVIEW_COUNTERS = (
    "publish",
    "deliver_get",
    "ack",
    "redeliver",
    "messages",
    "messages_ready",
    "messages_unacknowledged",
    "connection_created",
    "connection_closed",
    "channel_created",
    "channel_closed",
    "queue_declared",
    "queue_created",
    "queue_deleted",
)


def _fd_counts() -> tuple[int, int]:
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 0
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return used, soft if soft > 0 else 0


class Activity:
    def __init__(
        self,
        settings: BrokerSettings,
        catalog: Catalog,
        connections: Connections,
        stats: Stats,
        alarms: ResourceAlarms,
        store: MessageStore,
    ) -> None:
        self._catalog = catalog
        self._connections = connections
        self.counters = stats.counters
        self.sampler = stats.sampler
        self._latency = stats.latency
        self.resource_alarms = alarms
        self.started_at = time.time()
        self.listeners: list[ListenerInfo] = []  # the server adds each as it opens
        self.data_dir = settings.data_dir
        self._parameters = catalog.parameters
        # this node's name, or in a cluster its first node's (roost.cluster sets it)
        self.default_cluster_name = settings.cluster_name
        # in a cluster (roost.cluster sets both): this node's --node-name and the members
        self.node_name = settings.cluster_name
        self.members: Callable[[], list[MemberInfo]] | None = None
        # the durable store: its size and fsync latencies for /metrics
        self._store = store

    @property
    def cluster_name(self) -> str:
        """RabbitMQ's: the ``cluster_name`` global parameter when set, else the default."""
        value = self._parameters.global_values.get("cluster_name")
        return value if isinstance(value, str) and value else self.default_cluster_name

    # -- sampling -------------------------------------------------------------------------

    def sample_rates(self, now: float | None = None) -> None:
        """Take one sample of every counter; called every few seconds by the HTTP layer."""
        s = self.sampler
        s.begin(time.time() if now is None else now)
        for vhost in self._catalog.vhosts.values():
            for q in vhost.queues.values():
                ready, unacked = q.message_count, q.unacked
                s.observe(
                    q,
                    QUEUE_COUNTERS,
                    (
                        q.stat_published,
                        q.stat_delivered,
                        q.stat_acked,
                        q.stat_redelivered,
                        ready + unacked,
                        ready,
                        unacked,
                    ),
                )
            for ex in vhost.exchanges.values():
                s.observe(ex, EXCHANGE_COUNTERS, (ex.stat_in, ex.stat_out))
        for client in self._connections:
            t = client.traffic
            s.observe(client, CONNECTION_COUNTERS, (t.recv_oct, t.send_oct))
        totals, churn, messages = self.totals(), self.churn(), self._message_counts()
        values = (
            totals.published,
            totals.delivered,
            totals.acked,
            totals.redelivered,
            messages.total,
            messages.ready,
            messages.unacknowledged,
            churn.connection_created,
            churn.connection_closed,
            churn.channel_created,
            churn.channel_closed,
            churn.queue_declared,
            churn.queue_created,
            churn.queue_deleted,
        )
        s.observe("overview", OVERVIEW_COUNTERS, values)
        for name, value in zip(OVERVIEW_COUNTERS[:7], values, strict=False):
            s.record(name, value)
        s.end()

    # -- totals ---------------------------------------------------------------------------

    def _all_queues(self) -> Iterator[Queue]:
        for vhost in self._catalog.vhosts.values():
            yield from vhost.queues.values()

    def _message_counts(self) -> MessageCounts:
        return message_counts(self._all_queues())

    def totals(self) -> Totals:
        c = self.counters
        published_in, published_out = c.retired_published_in, c.retired_published_out
        delivered, acked, redelivered = c.retired_delivered, c.retired_acked, c.retired_redelivered
        for vhost in self._catalog.vhosts.values():
            for ex in vhost.exchanges.values():
                published_in += ex.stat_in
                published_out += ex.stat_out
            for q in vhost.queues.values():
                delivered += q.stat_delivered
                acked += q.stat_acked
                redelivered += q.stat_redelivered
        recv, send = c.retired_recv_oct, c.retired_send_oct
        for client in self._connections:
            recv += client.traffic.recv_oct
            send += client.traffic.send_oct
        return Totals(published_in, published_out, delivered, acked, redelivered, recv, send)

    def churn(self) -> Churn:
        c = self.counters
        return Churn(
            c.connection_created,
            c.connection_closed,
            c.channel_created,
            c.channel_closed,
            c.queue_declared,
            c.queue_created,
            c.queue_deleted,
        )

    # -- connections, channels, consumers -----------------------------------------------------

    def list_connections(
        self, vhost: str | None = None, *, closed: bool = False
    ) -> list[ConnectionInfo]:
        if vhost is not None:
            self._catalog.vhost(vhost)
        if closed:
            return [c for c in self._connections.closed if vhost is None or c.vhost == vhost]
        return [
            connection_info(c, self.sampler)
            for c in self._connections
            if vhost is None or c.vhost.name == vhost
        ]

    def connection_info(self, name: str) -> ConnectionInfo:
        return connection_info(self._connections.named(name), self.sampler)

    def list_channels(self, vhost: str | None = None) -> list[ChannelInfo]:
        if vhost is not None:
            self._catalog.vhost(vhost)
        return [channel_info(s) for s in self._connections.sessions(vhost)]

    def list_consumers(self, vhost: str | None = None) -> list[ConsumerInfo]:
        if vhost is not None:
            self._catalog.vhost(vhost)
        out = []
        for session in self._connections.sessions(vhost):
            channel = channel_info(session)
            for c in session.consumers.values():
                out.append(
                    ConsumerInfo(
                        vhost=c.queue.vhost.name,
                        queue=c.queue.name,
                        consumer_tag=c.tag,
                        channel=channel,
                        ack_required=not c.no_ack,
                        exclusive=c.is_exclusive(),
                        prefetch_count=c.prefetch,
                        arguments=dict(c.arguments),
                        active=c.queue.consumer_active(c),
                        single_active=c.queue.single_active,
                    )
                )
        return out

    # -- node -----------------------------------------------------------------------------

    def node_info(self) -> NodeInfo:
        alarms = self.resource_alarms
        fd_used, fd_total = _fd_counts()
        try:
            disk_free = disk_free_bytes(self.data_dir)
        except OSError:
            disk_free = 0
        now = time.time()
        return NodeInfo(
            name=self.node_name,
            version=__version__,
            python_version=platform.python_version(),
            pid=os.getpid(),
            uptime_ms=int((now - self.started_at) * 1000),
            started_at=self.started_at,
            mem_used=rss_bytes(),
            fd_used=fd_used,
            fd_total=fd_total,
            processors=os.cpu_count() or 1,
            disk_free=disk_free,
            data_dir=os.path.abspath(self.data_dir),
            mem_alarm=MEMORY in alarms.active,
            disk_free_alarm=DISK in alarms.active,
            mem_limit=alarms.mem_limit,
            disk_free_limit=alarms.disk_free_limit,
        )

    def cluster_members(self) -> list[MemberInfo]:
        """Every member of this node's cluster, down ones too; [] for a single node."""
        return [] if self.members is None else self.members()

    def store_info(self) -> StoreInfo | None:
        return store_info(self._store)

    def overview(self) -> OverviewInfo:
        sessions = [s for c in self._connections for s in c.sessions]
        names = ("messages", "messages_ready", "messages_unacknowledged", "publish")
        history = {n: self.sampler.recent(n, 600) for n in (*names, "deliver_get", "ack")}
        return OverviewInfo(
            node=self.node_info(),
            cluster_name=self.cluster_name,
            exchange_types=tuple(sorted(EXCHANGE_TYPES)),
            object_totals={
                "connections": len(self._connections),
                "channels": len(sessions),
                "consumers": sum(len(s.consumers) for s in sessions),
                "exchanges": sum(len(v.exchanges) for v in self._catalog.vhosts.values()),
                "queues": sum(len(v.queues) for v in self._catalog.vhosts.values()),
            },
            messages=self._message_counts(),
            totals=self.totals(),
            churn=self.churn(),
            rates=self.sampler.rates("overview"),
            listeners=tuple(self.listeners),
            history=history,
        )

    def set_vm_memory_high_watermark(self, spec: str) -> None:
        """Operator call: a fraction of RAM or a size; ValueError when unreadable."""
        self.resource_alarms.set_memory_watermark(spec)

    def set_disk_free_limit(self, spec: str) -> None:
        self.resource_alarms.set_disk_free_limit(spec)

    def protocol_totals(self) -> list[ProtocolTotals]:
        """The global counters per protocol (core/protocol_totals.py)."""
        return protocol_totals(self.counters, self._connections)

    def dead_lettered(self) -> dict[tuple[str, str], int]:
        """Messages dead-lettered, by (queue kind, reason), over every vhost."""
        out: dict[tuple[str, str], int] = {}
        for vhost in self._catalog.vhosts.values():
            for key, n in vhost.dead_lettered.items():
                out[key] = out.get(key, 0) + n
        return out

    def latency(self) -> LatencyInfo | None:
        """The publish-to-deliver and publish-to-confirm histograms; None when off."""
        latency = self._latency
        if latency is None:
            return None

        def snapshot(h: Histogram) -> HistogramInfo:
            return HistogramInfo(BOUNDS, tuple(h.buckets), h.count, h.total)

        return LatencyInfo(latency.every, snapshot(latency.deliver), snapshot(latency.confirm))

    def mutator_totals(self) -> MutatorTotals:
        s = mutator_stats
        return MutatorTotals(s.failures, s.rejected, s.dropped)

    def alarms(self) -> list[str]:
        """The resource alarms in effect: "memory", "disk"."""
        return sorted(self.resource_alarms.active)


def store_info(store: MessageStore) -> StoreInfo:
    """Bytes, segments and the fsync latency histogram for /metrics."""
    stats = store.fsync_stats
    running = 0
    buckets = []
    for bound, count in zip(stats.bounds, stats.counts, strict=False):
        running += count
        buckets.append((bound, running))
    return StoreInfo(
        bytes_on_disk=store.bytes_on_disk,
        segments=store.segment_count,
        fsyncs=stats.count,
        fsync_buckets=tuple(buckets),
        fsync_seconds_sum=stats.total,
    )
