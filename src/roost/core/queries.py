"""Typed read-only queries on the broker's definitions: queues, exchanges, bindings,
vhosts, users, permissions, policies and limits (live activity is in ``core.activity``).

Part of the management port (core/ports/management.py): the HTTP layer calls
``port.queries.list_queues(vhost)`` and gets ``QueueInfo`` snapshots back, never live
objects.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from roost.core.connections import connection_ref
from roost.core.errors import NotFound
from roost.core.events import Event, VHostChanged
from roost.core.info import (
    BindingInfo,
    ExchangeInfo,
    MessageCounts,
    PermissionInfo,
    PolicyInfo,
    QueueInfo,
    Rates,
    TopicPermissionInfo,
    UserInfo,
    VHostInfo,
)
from roost.core.policy import Policy, effective_policy, merge_operator
from roost.core.queues.stream import StreamQueue

if TYPE_CHECKING:
    from roost.core.auth import User
    from roost.core.catalog import Catalog
    from roost.core.connections import Connections
    from roost.core.events import Listener
    from roost.core.exchanges import Exchange
    from roost.core.queues.base import Queue
    from roost.core.stats import RateSampler
    from roost.core.vhost import VHost

log = logging.getLogger("roost.broker")


def properties_key(routing_key: str, arguments: dict[str, Any]) -> str:
    """A binding's id in API paths: the quoted key, plus a hash of its arguments if any."""
    key = quote(routing_key, safe="") if routing_key else ""
    if not arguments:
        return key or "~"
    digest = hashlib.sha1(
        json.dumps(arguments, sort_keys=True, default=str).encode(), usedforsecurity=False
    ).digest()
    return f"{key}~{base64.urlsafe_b64encode(digest[:6]).decode()}"


class Queries:
    def __init__(
        self,
        catalog: Catalog,
        connections: Connections,
        sampler: RateSampler,
        authenticate: Callable[..., User],
    ) -> None:
        self._catalog = catalog
        self._connections = connections
        self.sampler = sampler
        self._authenticate = authenticate
        self.vhost = catalog.vhost
        self.can_access_vhost = catalog.can_access_vhost

    def follow(self, listener: Listener) -> None:
        """Tell ``listener`` every definition change from now on, broker-wide and in
        every vhost (vhosts added later too), as the typed events of core/events.py.
        It is called synchronously inside the change: read what is needed, then return."""
        for vhost in list(self._catalog.vhosts.values()):
            vhost.on_change.append(listener)

        def broker_changed(event: Event) -> None:
            if isinstance(event, VHostChanged) and listener not in event.vhost.on_change:
                event.vhost.on_change.append(listener)
            listener(event)

        self._catalog.on_change.append(broker_changed)

    def check_vhost(self, name: str) -> None:
        """NotFound unless the vhost exists."""
        self._catalog.vhost(name)

    # -- policies -------------------------------------------------------------------------

    def _policy_for(self, vhost: str, kind: str, name: str, qtype: str = "classic") -> Any:
        matching = [p for (v, _), p in self._catalog.policies.items() if v == vhost]
        policy = effective_policy(matching, kind, name, qtype) if matching else None
        return None if policy is None else _policy_info(policy)

    def _operator_policy_for(self, vhost: str, name: str, qtype: str) -> PolicyInfo | None:
        operators = self._catalog.operator_policies
        matching = [p for (v, _), p in operators.items() if v == vhost] if operators else None
        policy = effective_policy(matching, "queue", name, qtype) if matching else None
        return None if policy is None else _policy_info(policy)

    def list_policies(self, vhost: str | None = None) -> list[PolicyInfo]:
        if vhost is not None:
            self.vhost(vhost)
        return [
            _policy_info(p)
            for (v, _), p in sorted(self._catalog.policies.items())
            if vhost is None or v == vhost
        ]

    def policy_info(self, vhost: str, name: str) -> PolicyInfo:
        policy = self._catalog.policies.get((vhost, name))
        if policy is None:
            raise NotFound(f"no policy '{name}' in vhost '{vhost}'")
        return _policy_info(policy)

    # -- queues and exchanges ---------------------------------------------------------------

    def _vhosts(self, name: str | None) -> list[VHost]:
        return list(self._catalog.vhosts.values()) if name is None else [self.vhost(name)]

    def _queue_info(self, q: Queue) -> QueueInfo:
        exclusive_tag = next((c.tag for c in q.consumers if c.is_exclusive()), None)
        owner = q.exclusive_owner
        policy = self._policy_for(q.vhost.name, "queue", q.name, q.kind)
        operator = self._operator_policy_for(q.vhost.name, q.name, q.kind)
        return QueueInfo(
            vhost=q.vhost.name,
            name=q.name,
            type=q.kind,
            durable=q.durable,
            auto_delete=q.auto_delete,
            exclusive=owner is not None,
            arguments=dict(q.arguments),
            messages=MessageCounts(q.message_count, q.unacked, q.ready_bytes),
            consumers=len(q.consumers),
            published=q.stat_published,
            delivered=q.stat_delivered,
            acked=q.stat_acked,
            redelivered=q.stat_redelivered,
            rates=self.sampler.rates(q),
            owner=None if owner is None else connection_ref(owner),
            exclusive_consumer_tag=exclusive_tag,
            policy=policy,
            operator_policy=operator,
            effective_definition=merge_operator(
                policy.definition if policy else None,
                operator.definition if operator else {},
            ),
            # RabbitMQ's "flow": the queue holds its publishers back (core/flow.py)
            state=_state(q),
            node=getattr(q, "home", ""),
            **_stream_offsets(q),
            **_group(q),
        )

    def list_queues(self, vhost: str | None = None) -> list[QueueInfo]:
        return [self._queue_info(q) for v in self._vhosts(vhost) for q in v.queues.values()]

    def queue_info(self, vhost: str, name: str) -> QueueInfo:
        q = self.vhost(vhost).queues.get(name)  # shown even when its home node is down
        if q is None:
            raise NotFound(f"no queue '{name}' in vhost '{vhost}'")
        return self._queue_info(q)

    def _exchange_info(self, vhost: str, ex: Exchange) -> ExchangeInfo:
        return ExchangeInfo(
            vhost=vhost,
            name=ex.name,
            type=ex.kind,
            durable=ex.durable,
            auto_delete=ex.auto_delete,
            internal=ex.internal,
            arguments=dict(ex.arguments),
            publish_in=ex.stat_in,
            publish_out=ex.stat_out,
            rates=self.sampler.rates(ex),
            policy=self._policy_for(vhost, "exchange", ex.name) if ex.name else None,
        )

    def list_exchanges(self, vhost: str | None = None) -> list[ExchangeInfo]:
        return [
            self._exchange_info(v.name, ex)
            for v in self._vhosts(vhost)
            for ex in v.exchanges.values()
        ]

    def exchange_info(self, vhost: str, name: str) -> ExchangeInfo:
        return self._exchange_info(vhost, self.vhost(vhost).exchange(name))

    def list_bindings(
        self,
        vhost: str | None = None,
        *,
        source: str | None = None,
        destination: str | None = None,
        destination_type: str | None = None,
    ) -> list[BindingInfo]:
        vhosts = self._vhosts(vhost)
        out: list[BindingInfo] = []
        for v in vhosts:
            if source is not None:
                v.exchange(source)
            if destination is not None:
                if destination_type == "queue":
                    v.queue(destination)
                else:
                    v.exchange(destination)
            for ex in v.exchanges.values():
                if source is not None and ex.name != source:
                    continue
                if ex.name == "":
                    # the default exchange's implicit bindings, as RabbitMQ lists them
                    bound: list[tuple[Any, str, dict[str, Any]]] = [
                        (q, q.name, {}) for q in v.queues.values()
                    ]
                else:
                    bound = [
                        (b.destination, b.routing_key, b.arguments) for b in ex.bindings.values()
                    ]
                for dest, key, args in bound:
                    dtype = "exchange" if dest.is_exchange else "queue"
                    if destination is not None and (
                        dest.name != destination or dtype != (destination_type or dtype)
                    ):
                        continue
                    out.append(
                        BindingInfo(
                            v.name,
                            ex.name,
                            dest.name,
                            dtype,
                            key,
                            dict(args),
                            properties_key(key, args),
                        )
                    )
        return out

    def binding_info(
        self, vhost: str, source: str, destination_type: str, destination: str, props: str
    ) -> BindingInfo:
        for b in self.list_bindings(
            vhost, source=source, destination=destination, destination_type=destination_type
        ):
            if b.properties_key == props:
                return b
        raise NotFound(f"no binding '{props}' from '{source}' to '{destination}'")

    # -- vhosts ---------------------------------------------------------------------------

    def _vhost_info(self, vhost: VHost) -> VHostInfo:
        recv = send = 0
        for client in self._connections:
            if client.vhost is vhost:
                recv += client.traffic.recv_oct
                send += client.traffic.send_oct
        rates: dict[str, float] = {}
        for q in vhost.queues.values():
            for name, value in self.sampler.rates(q).values.items():
                rates[name] = rates.get(name, 0.0) + value
        published = 0
        for ex in vhost.exchanges.values():
            published += ex.stat_in
            rates["publish"] = rates.get("publish", 0.0) + self.sampler.rates(ex).get("publish_in")
        for client in self._connections:
            if client.vhost is vhost:
                for name, value in self.sampler.rates(client).values.items():
                    rates[name] = rates.get(name, 0.0) + value
        return VHostInfo(
            name=vhost.name,
            description=getattr(vhost, "description", ""),
            tags=tuple(getattr(vhost, "tags", ())),
            default_queue_type=getattr(vhost, "default_queue_type", "classic"),
            tracing=vhost.tracer is not None,
            messages=message_counts(vhost.queues.values()),
            published=published,
            recv_oct=recv,
            send_oct=send,
            rates=Rates({k: round(v, 2) for k, v in rates.items()}),
        )

    def list_vhosts(self) -> list[VHostInfo]:
        return [self._vhost_info(v) for v in self._catalog.vhosts.values()]

    def vhost_info(self, name: str) -> VHostInfo:
        return self._vhost_info(self.vhost(name))

    # -- limits ---------------------------------------------------------------------------

    def vhost_limits(self, vhost: str | None = None) -> list[tuple[str, dict[str, int]]]:
        """(vhost, limits) for each vhost that has some (or the one asked for)."""
        return [(v.name, dict(v.limits)) for v in self._vhosts(vhost) if v.limits]

    def list_user_limits(self, user: str | None = None) -> list[tuple[str, dict[str, int]]]:
        if user is not None and user not in self._catalog.users:
            raise NotFound(f"no user '{user}'")
        return [
            (name, dict(limits))
            for name, limits in self._catalog.user_limits.items()
            if limits and (user is None or name == user)
        ]

    # -- users and permissions --------------------------------------------------------------

    def list_users(self) -> list[UserInfo]:
        return [_user_info(u) for u in self._catalog.users.values()]

    def user_info(self, name: str) -> UserInfo:
        user = self._catalog.users.get(name)
        if user is None:
            raise NotFound(f"no user '{name}'")
        return _user_info(user)

    def login(self, username: str, password: str, *, peer_host: str) -> UserInfo:
        """Authenticate as a protocol would (loopback-only users included)."""
        user = self._authenticate(username, password, peer_host=peer_host, protocol="HTTP")
        return _user_info(user)

    def list_permissions(
        self, *, user: str | None = None, vhost: str | None = None
    ) -> list[PermissionInfo]:
        return [
            PermissionInfo(u, v, p.configure, p.write, p.read)
            for (u, v), p in self._catalog.permissions.items()
            if (user is None or u == user) and (vhost is None or v == vhost)
        ]

    def permission_info(self, vhost: str, user: str) -> PermissionInfo:
        p = self._catalog.permissions.get((user, vhost))
        if p is None:
            raise NotFound(f"no permissions for user '{user}' in vhost '{vhost}'")
        return PermissionInfo(user, vhost, p.configure, p.write, p.read)

    def list_topic_permissions(
        self, *, user: str | None = None, vhost: str | None = None
    ) -> list[TopicPermissionInfo]:
        return [
            TopicPermissionInfo(u, v, x, p.write, p.read)
            for (u, v, x), p in self._catalog.topic_permissions.items()
            if (user is None or u == user) and (vhost is None or v == vhost)
        ]



def message_counts(queues: Iterable[Queue]) -> MessageCounts:
    ready = unacked = size = 0
    for q in queues:
        ready += q.message_count
        unacked += q.unacked
        size += q.ready_bytes
    return MessageCounts(ready, unacked, size)


def _user_info(user: User) -> UserInfo:
    return UserInfo(user.name, user.password_hash, user.hashing_algorithm, tuple(user.tags))


def _group(q: Queue) -> dict[str, Any]:
    """A cluster's replicated quorum queue (roost.cluster.quorum): leader, members, online."""
    group = getattr(q, "group", None)
    if group is None:
        return {}
    return {"leader": group.leader, "members": list(group.members), "online": group.online()}


def _stream_offsets(q: Queue) -> dict[str, Any]:
    if not isinstance(q, StreamQueue):
        return {}
    return {
        "first_offset": q.log.first_offset,
        "next_offset": q.log.next_offset,
        "max_offset_lag": q.max_offset_lag(),
    }


def _policy_info(p: Policy) -> PolicyInfo:
    return PolicyInfo(p.vhost, p.name, p.pattern, p.apply_to, dict(p.definition), p.priority)


def _state(q: Queue) -> str:
    """RabbitMQ's queue states: "down" when a cluster's queue has its home node down,
    "flow" while it holds its publishers back (core/flow.py), else "running"."""
    if q.remote:
        try:
            q.check_available()
        except NotFound:
            return "down"
    return "flow" if getattr(getattr(q, "flow", None), "congested", False) else "running"
