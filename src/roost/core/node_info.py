"""Frozen snapshots of the node itself, for the management API, metrics and StatsD: its
process and resources, listeners, store, lifetime totals and churn, per-protocol
counters, latency histograms, mutators, cluster members. The overview
(``core/info.py``'s ``OverviewInfo``) is made of them; ``roost.core.info`` re-exports
each, so the HTTP layer's one snapshot module stays its only one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ListenerInfo:
    protocol: str  # "amqp", "http", "stomp", …
    ip_address: str
    port: int


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What the durable store reports, when one is attached (see ``Broker.store_info``)."""

    bytes_on_disk: int = 0
    segments: int = 0
    fsyncs: int = 0
    # cumulative histogram: (upper bound in seconds, count of fsyncs at most that long)
    fsync_buckets: tuple[tuple[float, int], ...] = ()
    fsync_seconds_sum: float = 0.0


@dataclass(frozen=True, slots=True)
class Churn:
    """Lifetime counts of objects created and closed (RabbitMQ's ``churn_rates``)."""

    connection_created: int = 0
    connection_closed: int = 0
    channel_created: int = 0
    channel_closed: int = 0
    queue_declared: int = 0
    queue_created: int = 0
    queue_deleted: int = 0


@dataclass(frozen=True, slots=True)
class Totals:
    """Broker-wide lifetime counters, monotonic (deleted objects' counts are kept)."""

    published: int = 0  # messages received by exchanges
    routed: int = 0  # messages that reached at least one queue
    delivered: int = 0  # deliveries and basic.gets
    acked: int = 0
    redelivered: int = 0
    recv_oct: int = 0
    send_oct: int = 0


@dataclass(frozen=True, slots=True)
class ProtocolTotals:
    """RabbitMQ's global counters for one protocol (rabbitmq_global_*): lifetime sums
    over open and closed connections, and how many publish and consume now."""

    protocol: str
    received: int = 0
    confirm_received: int = 0
    unroutable: int = 0
    returned: int = 0
    confirmed: int = 0
    consume_auto_ack: int = 0
    consume_manual_ack: int = 0
    get_auto_ack: int = 0
    get_manual_ack: int = 0
    get_empty: int = 0
    publishers: int = 0
    consumers: int = 0
    sizes: tuple[int, ...] = ()  # received bodies per core.client.SIZE_BOUNDS bucket
    errors: tuple[tuple[str, int], ...] = ()  # (error name, count): the stream protocol's
    size_sum: int = 0  # the received bodies' bytes


@dataclass(frozen=True, slots=True)
class HistogramInfo:
    """Cumulative counts per upper bound (seconds), the count and the sum."""

    bounds: tuple[float, ...]
    buckets: tuple[int, ...]  # one more than bounds: the last holds the slower ones
    count: int
    total: float


@dataclass(frozen=True, slots=True)
class LatencyInfo:
    """The live latency histograms (core/latency.py): one message in ``every`` timed."""

    every: int
    deliver: HistogramInfo
    confirm: HistogramInfo


@dataclass(frozen=True, slots=True)
class MutatorTotals:
    """What message mutators did, broker-wide (core/mutators)."""

    failures: int = 0  # a mutator raised something other than Rejected
    rejected: int = 0  # a mutator refused a message
    dropped: int = 0  # a mutator dropped a message


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    version: str
    python_version: str
    pid: int
    uptime_ms: int
    started_at: float
    mem_used: int  # resident set size in bytes
    fd_used: int
    fd_total: int
    processors: int
    disk_free: int
    data_dir: str
    run_queue: int = 0
    mem_alarm: bool = False
    disk_free_alarm: bool = False
    mem_limit: int = 0  # the memory high watermark in bytes
    disk_free_limit: int = 0


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """A cluster member as membership knows it (``running`` False: its lease is gone)."""

    name: str
    running: bool
    host: str
    http_port: int
    amqp_port: int
    pid: int
    started_ms: int
    version: str
