"""The management port: everything the HTTP API, the web UI, metrics, StatsD and
``roost ctl`` may ask of the core, as typed Protocols. The HTTP layer imports this module
(plus the snapshot types of ``core.info`` and the errors of ``core.errors``) and nothing
else of the core; ``core.management.Management`` implements it.

Four faces, each a component of its own:

- ``definitions``: changes to users, vhosts, permissions, topic permissions, policies
  and limits (``core.catalog``);
- ``queries``: typed snapshots of definitions: queues, exchanges, bindings, vhosts,
  users, permissions, policies, limits (``core.queries``);
- ``activity``: connections, channels, consumers, rates, totals, the node and its alarms
  (``core.activity``);
- ``operations``: queue, exchange, binding and message operations done on behalf of a
  management user, checked as the AMQP method would be (``core.manage``).

A change answered 2xx must survive a crash: ``durable_from_here`` is the one durability
wait the adapters use too (``core.completion.Completion``). In a cluster its completion
also means every live node applied the change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from roost.core.completion import Completion
    from roost.core.events import Listener
    from roost.core.info import (
        BindingInfo,
        ChannelInfo,
        Churn,
        ConnectionInfo,
        ConsumerInfo,
        ExchangeInfo,
        FetchedMessage,
        GlobalParameterInfo,
        ImportReport,
        LatencyInfo,
        ListenerInfo,
        MemberInfo,
        MutatorTotals,
        NodeInfo,
        OverviewInfo,
        ParameterInfo,
        PermissionInfo,
        PolicyInfo,
        ProtocolTotals,
        QueueInfo,
        StoreInfo,
        TopicPermissionInfo,
        Totals,
        UserInfo,
        VHostInfo,
    )
    from roost.core.message import Message

Limits = list[tuple[str, dict[str, int]]]


class DefinitionsAdmin(Protocol):
    """Changes to definitions; each ends in one typed event (core/events.py)."""

    def put_user(
        self,
        name: str,
        *,
        password: str | None = None,
        password_hash: str | None = None,
        hashing_algorithm: str | None = None,
        tags: Any = None,
    ) -> bool: ...
    def delete_user(self, name: str) -> None: ...
    def put_vhost(
        self,
        name: str,
        *,
        description: str | None = None,
        tags: Any = None,
        default_queue_type: str | None = None,
        creator: str | None = None,
        tracing: bool | None = None,
    ) -> bool: ...
    def delete_vhost(self, name: str) -> None: ...
    def put_permission(
        self, user: str, vhost: str, *, configure: Any, write: Any, read: Any
    ) -> bool: ...
    def delete_permission(self, user: str, vhost: str) -> None: ...
    def put_topic_permission(
        self, user: str, vhost: str, *, exchange: Any, write: Any, read: Any
    ) -> bool: ...
    def delete_topic_permission(
        self, user: str, vhost: str, exchange: str | None = None
    ) -> None: ...
    def check_permission(
        self, user: str, vhost: str, access: str, kind: str, name: str
    ) -> None: ...
    def put_policy(
        self,
        vhost: str,
        name: str,
        *,
        pattern: Any,
        definition: Any,
        priority: Any = 0,
        apply_to: Any = "all",
        check_mutators: bool = True,
    ) -> bool: ...
    def delete_policy(self, vhost: str, name: str) -> None: ...
    def put_vhost_limit(self, vhost: str, name: str, value: Any) -> None: ...
    def delete_vhost_limit(self, vhost: str, name: str) -> None: ...
    def put_user_limit(self, user: str, name: str, value: Any) -> None: ...
    def delete_user_limit(self, user: str, name: str) -> None: ...


class DefinitionQueries(Protocol):
    """Typed snapshots of definitions; NotFound for a vhost or object that is not there.
    ``follow`` tells a listener of every change as it happens (the typed events of
    core/events.py, broker-wide and in every vhost), for what follows definitions from
    outside the core (federation links) without polling the snapshots."""

    def follow(self, listener: Listener) -> None: ...

    def check_vhost(self, name: str) -> None: ...
    def can_access_vhost(self, user: str, vhost: str) -> bool: ...
    def login(self, username: str, password: str, *, peer_host: str) -> UserInfo: ...
    def list_policies(self, vhost: str | None = None) -> list[PolicyInfo]: ...
    def policy_info(self, vhost: str, name: str) -> PolicyInfo: ...
    def list_queues(self, vhost: str | None = None) -> list[QueueInfo]: ...
    def queue_info(self, vhost: str, name: str) -> QueueInfo: ...
    def list_exchanges(self, vhost: str | None = None) -> list[ExchangeInfo]: ...
    def exchange_info(self, vhost: str, name: str) -> ExchangeInfo: ...
    def list_bindings(
        self,
        vhost: str | None = None,
        *,
        source: str | None = None,
        destination: str | None = None,
        destination_type: str | None = None,
    ) -> list[BindingInfo]: ...
    def binding_info(
        self, vhost: str, source: str, destination_type: str, destination: str, props: str
    ) -> BindingInfo: ...
    def list_vhosts(self) -> list[VHostInfo]: ...
    def vhost_info(self, name: str) -> VHostInfo: ...
    def vhost_limits(self, vhost: str | None = None) -> Limits: ...
    def list_user_limits(self, user: str | None = None) -> Limits: ...
    def list_users(self) -> list[UserInfo]: ...
    def user_info(self, name: str) -> UserInfo: ...
    def list_permissions(
        self, *, user: str | None = None, vhost: str | None = None
    ) -> list[PermissionInfo]: ...
    def permission_info(self, vhost: str, user: str) -> PermissionInfo: ...
    def list_topic_permissions(
        self, *, user: str | None = None, vhost: str | None = None
    ) -> list[TopicPermissionInfo]: ...


class ActivityQueries(Protocol):
    """Live activity, rates and the node."""

    node_name: str  # this node's name (--node-name)
    listeners: list[ListenerInfo]

    @property
    def cluster_name(self) -> str:
        """The adapter port's ``cluster_name()``: the ``cluster_name`` global parameter,
        else this node's name, or in a cluster its first node's."""

    def sample_rates(self, now: float | None = None) -> None: ...
    def totals(self) -> Totals: ...
    def churn(self) -> Churn: ...
    def list_connections(
        self, vhost: str | None = None, *, closed: bool = False
    ) -> list[ConnectionInfo]: ...
    def connection_info(self, name: str) -> ConnectionInfo: ...
    def list_channels(self, vhost: str | None = None) -> list[ChannelInfo]: ...
    def list_consumers(self, vhost: str | None = None) -> list[ConsumerInfo]: ...
    def node_info(self) -> NodeInfo: ...
    def cluster_members(self) -> list[MemberInfo]: ...
    def store_info(self) -> StoreInfo | None: ...
    def overview(self) -> OverviewInfo: ...
    def set_vm_memory_high_watermark(self, spec: str) -> None: ...
    def set_disk_free_limit(self, spec: str) -> None: ...
    def alarms(self) -> list[str]: ...
    def mutator_totals(self) -> MutatorTotals: ...
    def protocol_totals(self) -> list[ProtocolTotals]: ...
    def latency(self) -> LatencyInfo | None: ...
    def dead_lettered(self) -> dict[tuple[str, str], int]: ...


class ManagementOperations(Protocol):
    """Operations on behalf of a management user (``user``), permission-checked."""

    def mgmt_declare_queue(
        self,
        user: str,
        vhost: str,
        name: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> bool: ...
    def mgmt_delete_queue(
        self, user: str, vhost: str, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int: ...
    def mgmt_purge_queue(self, user: str, vhost: str, name: str) -> int: ...
    def mgmt_get_messages(
        self, user: str, vhost: str, queue: str, *, count: int, ackmode: str
    ) -> list[FetchedMessage]: ...
    def mgmt_last_publishing_id(
        self, user: str, vhost: str, stream: str, producer: str
    ) -> int | None: ...
    def mgmt_declare_exchange(
        self,
        user: str,
        vhost: str,
        name: str,
        kind: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> bool: ...
    def mgmt_delete_exchange(
        self, user: str, vhost: str, name: str, *, if_unused: bool = False
    ) -> None: ...
    def mgmt_publish(self, user: str, vhost: str, exchange: str, message: Message) -> bool: ...
    def mgmt_bind(
        self,
        user: str,
        vhost: str,
        source: str,
        destination_type: str,
        destination: str,
        routing_key: str,
        arguments: dict[str, Any],
    ) -> str: ...
    def mgmt_unbind(
        self,
        user: str,
        vhost: str,
        source: str,
        destination_type: str,
        destination: str,
        props: str,
    ) -> None: ...
    def close_connection(self, name: str, reason: str) -> None: ...
    def aliveness_test(self, user: str, vhost: str) -> None: ...


# told (vhost, name, value) when a parameter of a watched component is set, and
# (vhost, name, None) when it is cleared (or its vhost deleted)
ParameterWatcher = Callable[[str, str, Any], None]


class ParameterRuntime(Protocol):
    """What runs a component's parameters outside the core (the shovels: roost.shovel)
    offers the management API: a check of a value before it is stored, the status of
    what runs (RabbitMQ's rows, e.g. ``/api/shovels``) and a restart."""

    def validate(self, vhost: str, name: str, value: Any) -> None: ...  # ValueError
    def status(self, vhost: str | None = None) -> list[dict[str, Any]]: ...
    def restart(self, vhost: str, name: str) -> None: ...  # LookupError: no such one


class ParametersAdmin(Protocol):
    """Runtime and global parameters, operator policies (core/parameters.py).

    ``watch`` and ``attach_runtime`` are for what runs a component's parameters outside
    the core (roost.shovel): ``watch`` tells it of every set and clear, ``attach_runtime``
    lets ``put_parameter`` refuse a bad value (PreconditionFailed) and the HTTP API show
    its ``runtime_status`` and ``runtime_restart`` it (NotFound when none is attached)."""

    def watch(self, component: str, watcher: ParameterWatcher) -> None: ...
    def attach_runtime(self, component: str, runtime: ParameterRuntime) -> None: ...
    def runtime_status(self, component: str, vhost: str | None = None) -> list[dict[str, Any]]: ...
    def runtime_restart(self, component: str, vhost: str, name: str) -> None: ...

    def put_parameter(self, vhost: str, component: str, name: str, value: Any) -> bool: ...
    def delete_parameter(self, vhost: str, component: str, name: str) -> None: ...
    def list_parameters(
        self, vhost: str | None = None, component: str | None = None
    ) -> list[ParameterInfo]: ...
    def parameter_info(self, vhost: str, component: str, name: str) -> ParameterInfo: ...
    def put_global_parameter(self, name: str, value: Any) -> bool: ...
    def delete_global_parameter(self, name: str) -> None: ...
    def list_global_parameters(self) -> list[GlobalParameterInfo]: ...
    def global_parameter_info(self, name: str) -> GlobalParameterInfo: ...
    def put_operator_policy(
        self,
        vhost: str,
        name: str,
        *,
        pattern: Any,
        definition: Any,
        priority: Any = 0,
        apply_to: Any = "all",
    ) -> bool: ...
    def delete_operator_policy(self, vhost: str, name: str) -> None: ...
    def list_operator_policies(self, vhost: str | None = None) -> list[PolicyInfo]: ...
    def operator_policy_info(self, vhost: str, name: str) -> PolicyInfo: ...


class ManagementPort(Protocol):
    @property
    def definitions(self) -> DefinitionsAdmin: ...
    @property
    def parameters(self) -> ParametersAdmin: ...
    @property
    def queries(self) -> DefinitionQueries: ...
    @property
    def activity(self) -> ActivityQueries: ...
    @property
    def operations(self) -> ManagementOperations: ...

    def export_definitions(self, vhost: str | None = None) -> dict[str, Any]: ...
    def import_definitions(
        self, data: Any, vhost: str | None = None, *, creator: str | None = None
    ) -> ImportReport: ...
    def durable_from_here(self) -> Completion: ...
