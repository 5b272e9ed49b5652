"""Typed change events: what every definition change announces, one dataclass a kind.

The broker (users, vhosts, permissions, policies, limits) and each vhost (exchanges,
queues, bindings) tell their listeners (``on_change``) of every change with one of these.
Listeners are the components that follow definitions: persistence journals them, the
policy applier re-applies policies, the events stream records queue churn, the stats
count it, and the access cache refreshes connected clients' rights. A listener matches
on the class (``match event: case QueueDeclared(queue=q): ...``), so a kind that does
not exist is a type error, not a string that never compares equal.

The payloads are the live objects (a ``Queue``, a ``VHost``); a listener reads what it
needs at once and keeps nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roost.core.auth import Permission, TopicPermission, User
    from roost.core.exchanges.base import Binding, Exchange
    from roost.core.policy import Policy
    from roost.core.queues.base import Queue
    from roost.core.vhost import VHost

# -- broker-wide definitions ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VHostChanged:
    """A vhost was added, or its metadata (description, tags, queue type) changed."""

    vhost: VHost


@dataclass(frozen=True, slots=True)
class VHostDeleted:
    vhost: VHost


@dataclass(frozen=True, slots=True)
class VHostLimitsChanged:
    vhost: VHost


@dataclass(frozen=True, slots=True)
class UserChanged:
    """A user was added, or its password or tags changed."""

    user: User


@dataclass(frozen=True, slots=True)
class UserDeleted:
    user: User


@dataclass(frozen=True, slots=True)
class UserLimitsChanged:
    user: str  # the user's name


@dataclass(frozen=True, slots=True)
class PermissionChanged:
    user: str
    vhost: str
    permission: Permission


@dataclass(frozen=True, slots=True)
class PermissionDeleted:
    user: str
    vhost: str
    permission: Permission


@dataclass(frozen=True, slots=True)
class TopicPermissionChanged:
    user: str
    vhost: str
    permission: TopicPermission


@dataclass(frozen=True, slots=True)
class TopicPermissionDeleted:
    user: str
    vhost: str
    permission: TopicPermission


@dataclass(frozen=True, slots=True)
class PolicyChanged:
    policy: Policy


@dataclass(frozen=True, slots=True)
class PolicyDeleted:
    policy: Policy


@dataclass(frozen=True, slots=True)
class OperatorPolicyChanged:
    policy: Policy


@dataclass(frozen=True, slots=True)
class OperatorPolicyDeleted:
    policy: Policy


@dataclass(frozen=True, slots=True)
class ParameterChanged:
    """A runtime parameter (a shovel, a federation upstream, …) was set."""

    vhost: str
    component: str
    name: str
    value: Any


@dataclass(frozen=True, slots=True)
class ParameterDeleted:
    vhost: str
    component: str
    name: str
    value: Any


@dataclass(frozen=True, slots=True)
class GlobalParameterChanged:
    name: str
    value: Any


@dataclass(frozen=True, slots=True)
class GlobalParameterDeleted:
    name: str
    value: Any


# -- one vhost's objects ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExchangeDeclared:
    exchange: Exchange


@dataclass(frozen=True, slots=True)
class ExchangeDeleted:
    exchange: Exchange


@dataclass(frozen=True, slots=True)
class QueueDeclared:
    queue: Queue


@dataclass(frozen=True, slots=True)
class QueueDeleted:
    queue: Queue


@dataclass(frozen=True, slots=True)
class BindingAdded:
    binding: Binding


@dataclass(frozen=True, slots=True)
class BindingRemoved:
    binding: Binding


BrokerEvent = (
    VHostChanged
    | VHostDeleted
    | VHostLimitsChanged
    | UserChanged
    | UserDeleted
    | UserLimitsChanged
    | PermissionChanged
    | PermissionDeleted
    | TopicPermissionChanged
    | TopicPermissionDeleted
    | PolicyChanged
    | PolicyDeleted
    | OperatorPolicyChanged
    | OperatorPolicyDeleted
    | ParameterChanged
    | ParameterDeleted
    | GlobalParameterChanged
    | GlobalParameterDeleted
)
VHostEvent = (
    ExchangeDeclared
    | ExchangeDeleted
    | QueueDeclared
    | QueueDeleted
    | BindingAdded
    | BindingRemoved
)
Event = BrokerEvent | VHostEvent
Listener = Callable[[Event], None]
ACCESS_EVENTS = (
    UserChanged,
    UserDeleted,
    UserLimitsChanged,
    PermissionChanged,
    PermissionDeleted,
    TopicPermissionChanged,
    TopicPermissionDeleted,
)
