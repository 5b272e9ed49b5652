"""Frozen snapshots of broker objects, for the management API, metrics and StatsD.

Queries on the Broker return these; nothing in here refers back to a live object, so a
snapshot can be serialized after the loop has moved on. Counters (``published`` …) are
lifetime totals; ``Rates`` holds per-second rates over the last sampling interval (the
``*_details.rate`` of RabbitMQ's management API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# the node's own snapshots, re-exported: the HTTP layer reads every snapshot from here
from roost.core.node_info import Churn as Churn
from roost.core.node_info import HistogramInfo as HistogramInfo
from roost.core.node_info import LatencyInfo as LatencyInfo
from roost.core.node_info import ListenerInfo as ListenerInfo
from roost.core.node_info import MemberInfo as MemberInfo
from roost.core.node_info import MutatorTotals as MutatorTotals
from roost.core.node_info import NodeInfo as NodeInfo
from roost.core.node_info import ProtocolTotals as ProtocolTotals
from roost.core.node_info import StoreInfo as StoreInfo
from roost.core.node_info import Totals as Totals

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
