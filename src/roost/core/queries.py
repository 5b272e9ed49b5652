"""Typed read-only queries on the broker's definitions: queues, exchanges, vhosts, users,
permissions and policies (live activity is in ``core.activity``).

``QueriesMixin`` is mixed into ``Broker``: the HTTP layer calls ``broker.list_queues(vhost)``
and gets ``QueueInfo`` snapshots back, never live objects.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from roost.core.activity import connection_ref
from roost.core.errors import NotFound
from roost.core.events import BrokerEvent, Listener
from roost.core.info import (
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
from roost.core.listeners import tell_all
from roost.core.policy import Policy, effective_policy

if TYPE_CHECKING:
    from roost.core.auth import Permission, TopicPermission, User
    from roost.core.client import Client
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


class QueriesMixin:
    # Declared here for the type checker; Broker.__init__ and _init_management set them.
    if TYPE_CHECKING:
        users: dict[str, User]
        vhosts: dict[str, VHost]
        permissions: dict[tuple[str, str], Permission]
        clients: dict[int, Client]
        topic_permissions: dict[tuple[str, str, str], TopicPermission]
        policies: dict[tuple[str, str], Policy]
        sampler: RateSampler  # ActivityMixin

        def _message_counts(self, vhost: VHost | None = None) -> MessageCounts: ...

    def _init_management(self) -> None:
        self.topic_permissions = {}
        self.policies = {}
        self._init_activity()  # type: ignore[attr-defined]
        # every users/vhosts/permissions/policies change (core/events.py): the store hooks in
        self.on_change: list[Listener] = []

    def _changed(self, event: BrokerEvent) -> None:
        tell_all(self.on_change, event, log)

    # -- policies -------------------------------------------------------------------------

    def _policy_for(self, vhost: str, kind: str, name: str, qtype: str = "classic") -> Any:
        matching = [p for (v, _), p in self.policies.items() if v == vhost]
        policy = effective_policy(matching, kind, name, qtype) if matching else None
        return None if policy is None else _policy_info(policy)

    def list_policies(self, vhost: str | None = None) -> list[PolicyInfo]:
        if vhost is not None:
            self._vhost(vhost)
        return [
            _policy_info(p)
            for (v, _), p in sorted(self.policies.items())
            if vhost is None or v == vhost
        ]

    def policy_info(self, vhost: str, name: str) -> PolicyInfo:
        policy = self.policies.get((vhost, name))
        if policy is None:
            raise NotFound(f"no policy '{name}' in vhost '{vhost}'")
        return _policy_info(policy)

    # -- queues and exchanges ---------------------------------------------------------------

    def _vhost(self, name: str) -> VHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            raise NotFound(f"no vhost '{name}'")
        return vhost

    def _vhosts(self, name: str | None) -> list[VHost]:
        return list(self.vhosts.values()) if name is None else [self._vhost(name)]

    def _queue_info(self, q: Queue) -> QueueInfo:
        exclusive_tag = next((c.tag for c in q.consumers if c.exclusive), None)
        owner = q.exclusive_owner
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
            policy=self._policy_for(q.vhost.name, "queue", q.name, q.kind),
            # RabbitMQ's "flow": the queue holds its publishers back (core/flow.py)
            state="flow" if getattr(getattr(q, "flow", None), "congested", False) else "running",
        )

    def list_queues(self, vhost: str | None = None) -> list[QueueInfo]:
        return [self._queue_info(q) for v in self._vhosts(vhost) for q in v.queues.values()]

    def queue_info(self, vhost: str, name: str) -> QueueInfo:
        return self._queue_info(self._vhost(vhost).queue(name))

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
        return self._exchange_info(vhost, self._vhost(vhost).exchange(name))

    # -- vhosts ---------------------------------------------------------------------------

    def _vhost_info(self, vhost: VHost) -> VHostInfo:
        recv = send = 0
        for client in self.clients.values():
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
        for client in self.clients.values():
            if client.vhost is vhost:
                for name, value in self.sampler.rates(client).values.items():
                    rates[name] = rates.get(name, 0.0) + value
        return VHostInfo(
            name=vhost.name,
            description=getattr(vhost, "description", ""),
            tags=tuple(getattr(vhost, "tags", ())),
            default_queue_type=getattr(vhost, "default_queue_type", "classic"),
            tracing=False,
            messages=self._message_counts(vhost),
            published=published,
            recv_oct=recv,
            send_oct=send,
            rates=Rates({k: round(v, 2) for k, v in rates.items()}),
        )

    def list_vhosts(self) -> list[VHostInfo]:
        return [self._vhost_info(v) for v in self.vhosts.values()]

    def vhost_info(self, name: str) -> VHostInfo:
        return self._vhost_info(self._vhost(name))

    # -- users and permissions --------------------------------------------------------------

    def list_users(self) -> list[UserInfo]:
        return [_user_info(u) for u in self.users.values()]

    def user_info(self, name: str) -> UserInfo:
        user = self.users.get(name)
        if user is None:
            raise NotFound(f"no user '{name}'")
        return _user_info(user)

    def login(self, username: str, password: str, *, peer_host: str) -> UserInfo:
        """Authenticate as a protocol would (loopback-only users included)."""
        user = self.authenticate(username, password, peer_host=peer_host, protocol="HTTP")  # type: ignore[attr-defined]
        return _user_info(user)

    def list_permissions(
        self, *, user: str | None = None, vhost: str | None = None
    ) -> list[PermissionInfo]:
        return [
            PermissionInfo(u, v, p.configure, p.write, p.read)
            for (u, v), p in self.permissions.items()
            if (user is None or u == user) and (vhost is None or v == vhost)
        ]

    def permission_info(self, vhost: str, user: str) -> PermissionInfo:
        p = self.permissions.get((user, vhost))
        if p is None:
            raise NotFound(f"no permissions for user '{user}' in vhost '{vhost}'")
        return PermissionInfo(user, vhost, p.configure, p.write, p.read)

    def list_topic_permissions(
        self, *, user: str | None = None, vhost: str | None = None
    ) -> list[TopicPermissionInfo]:
        return [
            TopicPermissionInfo(u, v, x, p.write, p.read)
            for (u, v, x), p in self.topic_permissions.items()
            if (user is None or u == user) and (vhost is None or v == vhost)
        ]

    def can_access_vhost(self, user: str, vhost: str) -> bool:
        return (user, vhost) in self.permissions


def _user_info(user: User) -> UserInfo:
    return UserInfo(user.name, user.password_hash, user.hashing_algorithm, tuple(user.tags))


def _policy_info(p: Policy) -> PolicyInfo:
    return PolicyInfo(p.vhost, p.name, p.pattern, p.apply_to, dict(p.definition), p.priority)
