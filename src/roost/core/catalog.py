"""The definitions: vhosts (each holding its exchanges, queues and bindings), users,
permissions, topic permissions, policies and limits.

Every change to them goes through one of these methods and ends in one typed event
(core/events.py) told to ``on_change``: persistence journals it, the policy applier and
the stats follow it, connected clients' rights are refreshed from it. This is the one
door for definition changes that a cluster's definitions authority will take over
(etcd compare-and-swap, then the same events when the watch delivers the change).
A vhost's exchanges, queues and bindings change through the vhost (core/vhost.py), which
tells its own listeners.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from roost.core.access import Access
from roost.core.auth import (
    ALGORITHMS,
    BCRYPT,
    SHA256,
    Permission,
    TopicPermission,
    User,
    hash_password,
    is_bcrypt_base64,
)
from roost.core.errors import AccessRefused, NotFound, PreconditionFailed
from roost.core.events import (
    ACCESS_EVENTS,
    BrokerEvent,
    Event,
    Listener,
    PermissionChanged,
    PermissionDeleted,
    PolicyChanged,
    PolicyDeleted,
    TopicPermissionChanged,
    TopicPermissionDeleted,
    UserChanged,
    UserDeleted,
    UserLimitsChanged,
    VHostChanged,
    VHostDeleted,
    VHostLimitsChanged,
)
from roost.core.features.settings import validate_policy_definition
from roost.core.listeners import tell_all
from roost.core.parameters import Parameters
from roost.core.policy import Policy, effective_policy
from roost.core.tracing import Tracer
from roost.core.validation import (
    QUEUE_TYPES,
    USER_LIMITS,
    VHOST_LIMITS,
    check_regex,
    limit_value,
    parse_tags,
)
from roost.core.vhost import VHost

if TYPE_CHECKING:
    from roost.core.connections import Connections
    from roost.core.paging import Pager
    from roost.core.queues.streams import Streams

log = logging.getLogger("roost.broker")
log_trace = logging.getLogger("roost.trace")

class Catalog:
    def __init__(
        self, streams: Streams, pager: Pager, connections: Connections, node: str = "roost"
    ) -> None:
        self.users: dict[str, User] = {}
        self.vhosts: dict[str, VHost] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}
        self.topic_permissions: dict[tuple[str, str, str], TopicPermission] = {}
        self.policies: dict[tuple[str, str], Policy] = {}
        self.user_limits: dict[str, dict[str, int]] = {}
        # runtime and global parameters, operator policies (core/parameters.py)
        self.parameters = Parameters(self, self._changed)
        # every change (core/events.py); the components that follow definitions listen
        self.on_change: list[Listener] = [self._refresh_access]
        self._streams = streams
        self._pager = pager
        self._connections = connections
        self._node = node  # named in the firehose's copies (core/tracing.py)

    def _changed(self, event: BrokerEvent) -> None:
        tell_all(self.on_change, event, log)

    def vhost(self, name: str) -> VHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            raise NotFound(f"no vhost '{name}'")
        return vhost

    def can_access_vhost(self, user: str, vhost: str) -> bool:
        return (user, vhost) in self.permissions

    # -- the simplest changes (recovery, tests, the users file) ---------------------------

    def add_vhost(self, name: str) -> VHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            vhost = self.vhosts[name] = VHost(name, streams=self._streams, pager=self._pager)
            vhost.policy = partial(self.policy_definition, name)
            self._changed(VHostChanged(vhost))
        return vhost

    def add_user(self, name: str, password_hash: str, *, tags: list[str] | None = None) -> User:
        user = User(name, password_hash, list(tags or []))
        self.users[name] = user
        self._changed(UserChanged(user))
        return user

    def set_permission(self, user: str, vhost: str, permission: Permission) -> None:
        self.permissions[(user, vhost)] = permission
        self._changed(PermissionChanged(user, vhost, permission))

    # -- rights ---------------------------------------------------------------------------

    def access_for(self, user: User, vhost: str) -> Access:
        """``user``'s rights in ``vhost``, compiled (core/access.py)."""
        return Access(
            user,
            vhost,
            self.permissions.get((user.name, vhost)),
            [tp for key, tp in self.topic_permissions.items() if key[:2] == (user.name, vhost)],
        )

    def _refresh_access(self, event: Event) -> None:
        """Permissions, topic permissions or tags changed: connected clients get the new
        rights at once (their answers were cached). A deleted user's limits go too."""
        if isinstance(event, UserDeleted):
            self.user_limits.pop(event.user.name, None)
        if isinstance(event, ACCESS_EVENTS):
            for client in self._connections:
                if client.access is not None:
                    # put_user replaces the User object: read the tags from the new one
                    user = self.users.get(client.user.name, client.user)
                    client.access = self.access_for(user, client.vhost.name)

    @property
    def operator_policies(self) -> dict[tuple[str, str], Policy]:
        return self.parameters.operator_policies

    def policy_definition(self, vhost: str, kind: str, name: str) -> dict[str, Any] | None:
        """The definition of the policy that applies to an object, read when needed (the
        alternate exchange of an exchange that routed a message nowhere)."""
        matching = [p for (v, _), p in self.policies.items() if v == vhost]
        policy = effective_policy(matching, kind, name) if matching else None
        return None if policy is None else policy.definition

    # -- users ----------------------------------------------------------------------------

    def put_user(
        self,
        name: str,
        *,
        password: str | None = None,
        password_hash: str | None = None,
        hashing_algorithm: str | None = None,
        tags: Any = None,
    ) -> bool:
        """Create or update a user; True when created. A hash is kept as given (RabbitMQ
        exports import unchanged). Without password or hash a new user cannot log in with
        a password, and an existing user keeps the one it has."""
        if not isinstance(name, str) or not name:
            raise PreconditionFailed("user name must be a non-empty string")
        tag_list = parse_tags(tags)
        algorithm = hashing_algorithm or SHA256
        if algorithm not in ALGORITHMS:
            raise PreconditionFailed(f"unsupported hashing algorithm '{algorithm}'")
        if password is not None and not isinstance(password, str):
            raise PreconditionFailed("password must be a string")
        if password_hash is not None and not isinstance(password_hash, str):
            raise PreconditionFailed("password_hash must be a string")
        if algorithm == BCRYPT and password is None and not is_bcrypt_base64(password_hash or ""):
            raise PreconditionFailed("a bcrypt password_hash must be base64 of a $2a$/$2b$ hash")
        existing = self.users.get(name)
        if password is not None:
            new_hash, algorithm = hash_password(password), SHA256
        elif password_hash is not None:
            new_hash = password_hash
        elif existing is not None:
            new_hash, algorithm = existing.password_hash, existing.hashing_algorithm
        else:
            new_hash = ""
        user = self.add_user(name, new_hash, tags=tag_list)
        user.hashing_algorithm = algorithm
        self._changed(UserChanged(user))
        return existing is None

    def delete_user(self, name: str) -> None:
        user = self.users.pop(name, None)
        if user is None:
            raise NotFound(f"no user '{name}'")
        for key in [k for k in self.permissions if k[0] == name]:
            del self.permissions[key]
        for tkey in [k for k in self.topic_permissions if k[0] == name]:
            del self.topic_permissions[tkey]
        self._connections.close_where(
            lambda client: client.user is user, f"user '{name}' was deleted"
        )
        self._changed(UserDeleted(user))

    # -- vhosts ---------------------------------------------------------------------------

    def put_vhost(
        self,
        name: str,
        *,
        description: str | None = None,
        tags: Any = None,
        default_queue_type: str | None = None,
        creator: str | None = None,
        tracing: bool | None = None,
    ) -> bool:
        """Create a vhost or update its metadata; True when created. As in RabbitMQ, the
        user who creates a vhost gets full permissions in it."""
        if not isinstance(name, str) or not name:
            raise PreconditionFailed("vhost name must be a non-empty string")
        if description is not None and not isinstance(description, str):
            raise PreconditionFailed("description must be a string")
        if default_queue_type is not None and default_queue_type not in (
            *QUEUE_TYPES,
            "undefined",
        ):
            raise PreconditionFailed(f"invalid default queue type '{default_queue_type}'")
        created = name not in self.vhosts
        vhost = self.add_vhost(name)
        if description is not None:
            vhost.description = description
        if tags is not None:
            vhost.tags = parse_tags(tags)
        if default_queue_type is not None:
            vhost.default_queue_type = default_queue_type
        if tracing is not None and tracing != (vhost.tracer is not None):
            # the firehose, not a definition: nothing is journaled, as RabbitMQ keeps it
            # only until a restart
            vhost.tracer = Tracer(vhost, self._node) if tracing else None
            log_trace.info("%s tracing for vhost '%s'", "Enabling" if tracing else "Disabling",
                           name)  # fmt: skip
        self._changed(VHostChanged(vhost))
        if created and creator is not None and creator in self.users:
            self.set_permission(creator, name, Permission())
        return created

    def delete_vhost(self, name: str) -> None:
        vhost = self.vhost(name)
        self._connections.close_where(
            lambda client: client.vhost is vhost, f"vhost '{name}' is deleted"
        )
        for queue in list(vhost.queues.values()):
            vhost.delete_queue(queue)
        del self.vhosts[name]
        for key in [k for k in self.permissions if k[1] == name]:
            del self.permissions[key]
        for tkey in [k for k in self.topic_permissions if k[1] == name]:
            del self.topic_permissions[tkey]
        for pkey in [k for k in self.policies if k[0] == name]:
            del self.policies[pkey]
        self.parameters.forget_vhost(name)
        self._changed(VHostDeleted(vhost))

    # -- permissions ----------------------------------------------------------------------

    def _user_and_vhost(self, user: str, vhost: str) -> None:
        if user not in self.users:
            raise NotFound(f"no user '{user}'")
        self.vhost(vhost)

    def put_permission(
        self, user: str, vhost: str, *, configure: Any, write: Any, read: Any
    ) -> bool:
        self._user_and_vhost(user, vhost)
        permission = Permission(
            check_regex(configure, "configure"),
            check_regex(write, "write"),
            check_regex(read, "read"),
        )
        created = (user, vhost) not in self.permissions
        self.set_permission(user, vhost, permission)
        return created

    def delete_permission(self, user: str, vhost: str) -> None:
        permission = self.permissions.pop((user, vhost), None)
        if permission is None:
            raise NotFound(f"no permissions for user '{user}' in vhost '{vhost}'")
        self._changed(PermissionDeleted(user, vhost, permission))

    def put_topic_permission(
        self, user: str, vhost: str, *, exchange: Any, write: Any, read: Any
    ) -> bool:
        """Enforced for clients of the vhost (core/access.py) as soon as it is set."""
        self._user_and_vhost(user, vhost)
        if not isinstance(exchange, str) or not exchange:
            raise PreconditionFailed("exchange must be a non-empty string")
        tp = TopicPermission(exchange, check_regex(write, "write"), check_regex(read, "read"))
        created = (user, vhost, exchange) not in self.topic_permissions
        self.topic_permissions[(user, vhost, exchange)] = tp
        self._changed(TopicPermissionChanged(user, vhost, tp))
        return created

    def delete_topic_permission(self, user: str, vhost: str, exchange: str | None = None) -> None:
        keys = [
            k
            for k in self.topic_permissions
            if k[:2] == (user, vhost) and (exchange is None or k[2] == exchange)
        ]
        if not keys:
            raise NotFound(f"no topic permissions for user '{user}' in vhost '{vhost}'")
        for key in keys:
            tp = self.topic_permissions.pop(key)
            self._changed(TopicPermissionDeleted(user, vhost, tp))

    def check_permission(self, user: str, vhost: str, access: str, kind: str, name: str) -> None:
        """AccessRefused unless ``user`` may ``access`` (configure/write/read) the object,
        the same regular-expression check AMQP operations get in RabbitMQ."""
        permission = self.permissions.get((user, vhost))
        if permission is None or not permission.allows(access, name):
            raise AccessRefused(
                f"{access} access to {kind} '{name}' in vhost '{vhost}' refused for user '{user}'"
            )

    # -- policies -------------------------------------------------------------------------

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
    ) -> bool:
        """Create or replace a policy. It is validated in full before anything changes
        (``check_mutators``: see ``validate_policy_definition``)."""
        self.vhost(vhost)
        if not isinstance(name, str) or not name:
            raise PreconditionFailed("policy name must be a non-empty string")
        if not isinstance(pattern, str):
            raise PreconditionFailed("pattern must be a string")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise PreconditionFailed("priority must be an integer")
        if not isinstance(apply_to, str):
            raise PreconditionFailed("apply-to must be a string")
        policy = Policy(vhost, name, pattern, definition, priority, apply_to)
        validate_policy_definition(policy.definition, check_mutators=check_mutators)
        created = (vhost, name) not in self.policies
        self.policies[(vhost, name)] = policy
        self._changed(PolicyChanged(policy))
        return created

    def delete_policy(self, vhost: str, name: str) -> None:
        policy = self.policies.pop((vhost, name), None)
        if policy is None:
            raise NotFound(f"no policy '{name}' in vhost '{vhost}'")
        self._changed(PolicyDeleted(policy))

    # -- vhost limits (RabbitMQ's /api/vhost-limits) --------------------------------------

    def put_vhost_limit(self, vhost: str, name: str, value: Any) -> None:
        v = self.vhost(vhost)
        v.limits[name] = limit_value(name, value, VHOST_LIMITS)
        self._changed(VHostLimitsChanged(v))

    def delete_vhost_limit(self, vhost: str, name: str) -> None:
        v = self.vhost(vhost)
        if v.limits.pop(name, None) is None:
            raise NotFound(f"no limit '{name}' in vhost '{vhost}'")
        self._changed(VHostLimitsChanged(v))

    # -- user limits (RabbitMQ's /api/user-limits) ----------------------------------------

    def put_user_limit(self, user: str, name: str, value: Any) -> None:
        if user not in self.users:
            raise NotFound(f"no user '{user}'")
        self.user_limits.setdefault(user, {})[name] = limit_value(name, value, USER_LIMITS)
        self._changed(UserLimitsChanged(user))

    def delete_user_limit(self, user: str, name: str) -> None:
        limits = self.user_limits.get(user, {})
        if limits.pop(name, None) is None:
            raise NotFound(f"no limit '{name}' for user '{user}'")
        if not limits:
            self.user_limits.pop(user, None)
        self._changed(UserLimitsChanged(user))
