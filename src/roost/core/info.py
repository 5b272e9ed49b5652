"""Frozen snapshots of broker objects, for the management API, metrics and StatsD.

Queries on the Broker return these; nothing in here refers back to a live object, so a
snapshot can be serialized after the loop has moved on. Counters (``published`` …) are
lifetime totals; ``Rates`` holds per-second rates over the last sampling interval (the
``*_details.rate`` of RabbitMQ's management API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The tags RabbitMQ's management plugin understands, in increasing order of reach.
MANAGEMENT_TAGS = ("management", "policymaker", "monitoring", "administrator")


@dataclass(frozen=True, slots=True)
class Rates:
    """Per-second rates keyed by counter name (``publish``, ``deliver_get`` …)."""

    values: dict[str, float] = field(default_factory=dict)

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)


NO_RATES = Rates()


@dataclass(frozen=True, slots=True)
class Sample:
    """One point of a history: unix time in milliseconds and the value then."""

    timestamp: int
    value: float


@dataclass(frozen=True, slots=True)
class MessageCounts:
    ready: int = 0
    unacknowledged: int = 0
    bytes_ready: int = 0

    @property
    def total(self) -> int:
        return self.ready + self.unacknowledged


@dataclass(frozen=True, slots=True)
class ConnectionRef:
    """Enough to name a connection from a channel, consumer or exclusive queue."""

    name: str
    peer_host: str
    peer_port: int
    user: str = ""


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: dict[str, Any]
    priority: int


@dataclass(frozen=True, slots=True)
class ParameterInfo:
    vhost: str
    component: str
    name: str
    value: Any


@dataclass(frozen=True, slots=True)
class GlobalParameterInfo:
    name: str
    value: Any


@dataclass(frozen=True, slots=True)
class QueueInfo:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    exclusive: bool
    arguments: dict[str, Any]
    messages: MessageCounts
    consumers: int
    published: int
    delivered: int
    acked: int
    redelivered: int
    rates: Rates
    owner: ConnectionRef | None = None
    exclusive_consumer_tag: str | None = None
    policy: PolicyInfo | None = None
    state: str = "running"
    operator_policy: PolicyInfo | None = None
    # a stream's offsets: the first kept, the next to be written, the furthest-behind
    # consumer's distance from the end (zeros for other queues)
    first_offset: int = 0
    next_offset: int = 0
    max_offset_lag: int = 0
    # the policy's definition with the operator policy's limits over it, as applied
    effective_definition: dict[str, Any] = field(default_factory=dict)
    # a cluster's replicated quorum queue: its leader, every member, the members up and
    # in sync (None elsewhere)
    leader: str | None = None
    members: list[str] | None = None
    online: list[str] | None = None
    node: str = ""  # a cluster's home node of the queue when it is another node


@dataclass(frozen=True, slots=True)
class ExchangeInfo:
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    internal: bool
    arguments: dict[str, Any]
    publish_in: int
    publish_out: int
    rates: Rates
    policy: PolicyInfo | None = None


@dataclass(frozen=True, slots=True)
class BindingInfo:
    vhost: str
    source: str
    destination: str
    destination_type: str  # "queue" or "exchange"
    routing_key: str
    arguments: dict[str, Any]
    properties_key: str  # the binding's id in API paths, as RabbitMQ computes it


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    id: int
    name: str
    user_provided_name: str | None
    vhost: str
    user: str
    protocol: str
    peer_host: str
    peer_port: int
    connected_at: float  # unix seconds
    client_properties: dict[str, Any]
    channels: int
    recv_oct: int
    send_oct: int
    recv_cnt: int
    send_cnt: int
    rates: Rates
    state: str = "running"
    closed_reason: str | None = None
    closed_at: float | None = None
    ssl: bool = False
    auth_mechanism: str = "PLAIN"


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    connection: ConnectionRef
    number: int
    vhost: str
    user: str
    consumer_count: int
    messages_unacknowledged: int
    prefetch_count: int
    global_prefetch_count: int
    state: str  # "running" or "flow"
    confirm: bool = False  # publisher confirms on (AMQP confirm.select)
    transactional: bool = False  # AMQP tx.select
    messages_unconfirmed: int = 0  # publishes not yet confirmed (confirm mode)

    @property
    def name(self) -> str:
        return f"{self.connection.name} ({self.number})"


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    vhost: str
    queue: str
    consumer_tag: str
    channel: ChannelInfo
    ack_required: bool
    exclusive: bool
    prefetch_count: int
    arguments: dict[str, Any]
    active: bool
    single_active: bool = False  # on a queue with x-single-active-consumer


@dataclass(frozen=True, slots=True)
class VHostInfo:
    name: str
    description: str
    tags: tuple[str, ...]
    default_queue_type: str
    tracing: bool
    messages: MessageCounts
    published: int
    recv_oct: int
    send_oct: int
    rates: Rates


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    password_hash: str
    hashing_algorithm: str
    tags: tuple[str, ...]

    def has_tag(self, *tags: str) -> bool:
        return any(t in self.tags for t in tags)


@dataclass(frozen=True, slots=True)
class PermissionInfo:
    user: str
    vhost: str
    configure: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class TopicPermissionInfo:
    user: str
    vhost: str
    exchange: str
    write: str
    read: str


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


@dataclass(frozen=True, slots=True)
class OverviewInfo:
    node: NodeInfo
    cluster_name: str
    exchange_types: tuple[str, ...]
    object_totals: dict[str, int]
    messages: MessageCounts
    totals: Totals
    churn: Churn
    rates: Rates  # rates of Totals and of the queue gauges
    listeners: tuple[ListenerInfo, ...]
    history: dict[str, tuple[Sample, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FetchedMessage:
    """A message taken by the management API's "get messages"."""

    exchange: str
    routing_key: str
    redelivered: bool
    properties: dict[str, Any]
    body: bytes
    message_count: int  # messages left in the queue after this one


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What a definitions import created or updated, per section."""

    counts: dict[str, int] = field(default_factory=dict)
