"""Live activity: connections, channels, consumers, totals, rates and the node.

``ActivityMixin`` is mixed into ``Broker`` next to ``QueriesMixin`` (definitions-side
queries). ``sample_rates`` is the one periodic job: every few seconds it turns the
lifetime counters into per-second rates (see ``core.stats``).
"""

from __future__ import annotations

import os
import platform
import resource
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from roost import __version__
from roost.core.alarms import DISK, MEMORY, ResourceAlarms, rss_bytes
from roost.core.alarms import disk_free as disk_free_bytes
from roost.core.errors import NotFound
from roost.core.exchanges import EXCHANGE_TYPES
from roost.core.info import (
    ChannelInfo,
    Churn,
    ConnectionInfo,
    ConnectionRef,
    ConsumerInfo,
    ListenerInfo,
    MessageCounts,
    NodeInfo,
    OverviewInfo,
    StoreInfo,
    Totals,
)
from roost.core.stats import Counters, RateSampler

if TYPE_CHECKING:
    from collections.abc import Callable

    from roost.core.client import Client
    from roost.core.queues.base import Queue
    from roost.core.session import Session
    from roost.core.vhost import VHost

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
CLOSED_KEPT = 100  # recently closed connections kept, with the reason each closed


def split_peer(peer: str) -> tuple[str, int]:
    host, _, port = peer.rpartition(":")
    try:
        return host or peer, int(port)
    except ValueError:
        return peer, 0


def _fd_counts() -> tuple[int, int]:
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        used = 0
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return used, soft if soft > 0 else 0


class ActivityMixin:
    if TYPE_CHECKING:
        vhosts: dict[str, VHost]
        clients: dict[int, Client]

        def _vhost(self, name: str) -> VHost: ...

    def _init_activity(self) -> None:
        self.counters = Counters()
        self.sampler = RateSampler()
        self.closed_connections: deque[ConnectionInfo] = deque(maxlen=CLOSED_KEPT)
        self.started_at = time.time()
        self.listeners: list[ListenerInfo] = []  # the server fills this in
        self.data_dir = "."
        self.cluster_name = f"roost@{platform.node()}"
        # memory and disk alarms (core/alarms.py); the server sets the configured limits
        self.resource_alarms = ResourceAlarms(data_dir=".")
        # the durable store reports its size and fsync latencies through this, if attached
        self.store_stats: Callable[[], StoreInfo] | None = None

    # -- sampling -------------------------------------------------------------------------

    def sample_rates(self, now: float | None = None) -> None:
        """Take one sample of every counter; called every few seconds by the HTTP layer."""
        s = self.sampler
        s.begin(time.time() if now is None else now)
        for vhost in self.vhosts.values():
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
        for client in self.clients.values():
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
        for vhost in self.vhosts.values():
            yield from vhost.queues.values()

    def _message_counts(self, vhost: VHost | None = None) -> MessageCounts:
        queues = vhost.queues.values() if vhost is not None else self._all_queues()
        ready = unacked = size = 0
        for q in queues:
            ready += q.message_count
            unacked += q.unacked
            size += q.ready_bytes
        return MessageCounts(ready, unacked, size)

    def totals(self) -> Totals:
        c = self.counters
        published_in, published_out = c.retired_published_in, c.retired_published_out
        delivered, acked, redelivered = c.retired_delivered, c.retired_acked, c.retired_redelivered
        for vhost in self.vhosts.values():
            for ex in vhost.exchanges.values():
                published_in += ex.stat_in
                published_out += ex.stat_out
            for q in vhost.queues.values():
                delivered += q.stat_delivered
                acked += q.stat_acked
                redelivered += q.stat_redelivered
        recv, send = c.retired_recv_oct, c.retired_send_oct
        for client in self.clients.values():
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

    def _connection_info(self, client: Client) -> ConnectionInfo:
        host, port = split_peer(client.peer)
        given = client.properties.get("connection_name")
        t = client.traffic
        return ConnectionInfo(
            id=client.id,
            name=client.peer,
            user_provided_name=given if isinstance(given, str) and given else None,
            vhost=client.vhost.name,
            user=client.user.name,
            protocol=client.protocol,
            peer_host=host,
            peer_port=port,
            connected_at=client.opened_at,
            client_properties=dict(client.properties),
            channels=len(client.sessions),
            recv_oct=t.recv_oct,
            send_oct=t.send_oct,
            recv_cnt=t.recv_cnt,
            send_cnt=t.send_cnt,
            rates=self.sampler.rates(client),
            state=client.alarm_state or ("flow" if client.flow_held else "running"),
            ssl=client.ssl,
            auth_mechanism=client.auth_mechanism,
        )

    def list_connections(
        self, vhost: str | None = None, *, closed: bool = False
    ) -> list[ConnectionInfo]:
        if vhost is not None:
            self._vhost(vhost)
        if closed:
            return [c for c in self.closed_connections if vhost is None or c.vhost == vhost]
        return [
            self._connection_info(c)
            for c in self.clients.values()
            if vhost is None or c.vhost.name == vhost
        ]

    def _client_named(self, name: str) -> Client:
        for client in self.clients.values():
            if client.peer == name:
                return client
        raise NotFound(f"no connection '{name}'")

    def connection_info(self, name: str) -> ConnectionInfo:
        return self._connection_info(self._client_named(name))

    def _record_closed(self, client: Client, reason: str) -> None:
        """Called by ``disconnect``: keep a snapshot with the reason, fold its counters in."""
        info = replace(
            self._connection_info(client),
            state="closed",
            closed_reason=reason,
            closed_at=time.time(),
            channels=0,
        )
        self.closed_connections.append(info)
        self.counters.connection_closed += 1
        self.counters.retired_recv_oct += client.traffic.recv_oct
        self.counters.retired_send_oct += client.traffic.send_oct

    def _sessions(self, vhost: str | None) -> Iterator[Session]:
        for client in self.clients.values():
            if vhost is None or client.vhost.name == vhost:
                yield from client.sessions

    def list_channels(self, vhost: str | None = None) -> list[ChannelInfo]:
        if vhost is not None:
            self._vhost(vhost)
        return [_channel_info(s) for s in self._sessions(vhost)]

    def list_consumers(self, vhost: str | None = None) -> list[ConsumerInfo]:
        if vhost is not None:
            self._vhost(vhost)
        out = []
        for session in self._sessions(vhost):
            channel = _channel_info(session)
            for c in session.consumers.values():
                out.append(
                    ConsumerInfo(
                        vhost=c.queue.vhost.name,
                        queue=c.queue.name,
                        consumer_tag=c.tag,
                        channel=channel,
                        ack_required=not c.no_ack,
                        exclusive=c.exclusive,
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
            name=self.cluster_name,
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

    def store_info(self) -> StoreInfo | None:
        return None if self.store_stats is None else self.store_stats()

    def overview(self) -> OverviewInfo:
        sessions = [s for c in self.clients.values() for s in c.sessions]
        names = ("messages", "messages_ready", "messages_unacknowledged", "publish")
        history = {n: self.sampler.recent(n, 600) for n in (*names, "deliver_get", "ack")}
        return OverviewInfo(
            node=self.node_info(),
            cluster_name=self.cluster_name,
            exchange_types=tuple(sorted(EXCHANGE_TYPES)),
            object_totals={
                "connections": len(self.clients),
                "channels": len(sessions),
                "consumers": sum(len(s.consumers) for s in sessions),
                "exchanges": sum(len(v.exchanges) for v in self.vhosts.values()),
                "queues": sum(len(v.queues) for v in self.vhosts.values()),
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

    def alarms(self) -> list[str]:
        """The resource alarms in effect: "memory", "disk"."""
        return sorted(self.resource_alarms.active)


def connection_ref(client: Client) -> ConnectionRef:
    host, port = split_peer(client.peer)
    return ConnectionRef(client.peer, host, port, client.user.name)


def _channel_info(session: Session) -> ChannelInfo:
    client = session.client
    return ChannelInfo(
        connection=connection_ref(client),
        number=getattr(session, "number", 0),
        vhost=client.vhost.name,
        user=client.user.name,
        consumer_count=len(session.consumers),
        messages_unacknowledged=session.unacked_count,
        prefetch_count=session.prefetch_count,
        global_prefetch_count=session.global_prefetch,
        state="running" if session.flow_active else "flow",
    )
