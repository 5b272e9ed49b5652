"""Users, vhosts, permissions, topic permissions and policies: the broker's definitions.

``AdminMixin`` is mixed into ``Broker``. Every change goes through one of these methods
and ends in ``_changed(event)`` (core/events.py), so the durable store can persist definitions by
listening to ``broker.on_change`` instead of patching each caller.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from roost.core.auth import (
    ALGORITHMS,
    BCRYPT,
    SHA256,
    Permission,
    TopicPermission,
    hash_password,
    is_bcrypt_base64,
)
from roost.core.errors import AccessRefused, NotFound, PreconditionFailed
from roost.core.events import (
    BrokerEvent,
    PermissionDeleted,
    PolicyChanged,
    PolicyDeleted,
    TopicPermissionChanged,
    TopicPermissionDeleted,
    UserChanged,
    UserDeleted,
    VHostChanged,
    VHostDeleted,
)
from roost.core.features.settings import validate_policy_definition
from roost.core.policy import Policy

if TYPE_CHECKING:
    from roost.core.auth import User
    from roost.core.client import Client
    from roost.core.vhost import VHost

QUEUE_TYPES = ("classic", "quorum", "stream")


def check_regex(pattern: Any, what: str) -> str:
    if not isinstance(pattern, str):
        raise PreconditionFailed(f"{what} must be a string")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PreconditionFailed(
            f"invalid regular expression for {what} '{pattern}': {exc}"
        ) from None
    return pattern


def parse_tags(tags: Any) -> list[str]:
    """RabbitMQ accepts tags as a list or as one comma-separated string."""
    if tags is None:
        return []
    if isinstance(tags, str):
        return [t.strip() for t in tags.split(",") if t.strip()]
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        return [t.strip() for t in tags if t.strip()]
    raise PreconditionFailed("tags must be a list of strings or a comma-separated string")


class AdminMixin:
    if TYPE_CHECKING:
        users: dict[str, User]
        vhosts: dict[str, VHost]
        permissions: dict[tuple[str, str], Permission]
        topic_permissions: dict[tuple[str, str, str], TopicPermission]
        policies: dict[tuple[str, str], Policy]
        clients: dict[int, Client]

        def _changed(self, event: BrokerEvent) -> None: ...
        def _vhost(self, name: str) -> VHost: ...
        def add_vhost(self, name: str) -> VHost: ...
        def add_user(
            self, name: str, password_hash: str, *, tags: list[str] | None = None
        ) -> User: ...
        def set_permission(self, user: str, vhost: str, permission: Permission) -> None: ...

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
        for client in list(self.clients.values()):
            if client.user is user:
                client.force_close(f"user '{name}' was deleted")
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
        self._changed(VHostChanged(vhost))
        if created and creator is not None and creator in self.users:
            self.set_permission(creator, name, Permission())
        return created

    def delete_vhost(self, name: str) -> None:
        vhost = self._vhost(name)
        for client in list(self.clients.values()):
            if client.vhost is vhost:
                client.force_close(f"vhost '{name}' is deleted")
        for queue in list(vhost.queues.values()):
            vhost.delete_queue(queue)
        del self.vhosts[name]
        for key in [k for k in self.permissions if k[1] == name]:
            del self.permissions[key]
        for tkey in [k for k in self.topic_permissions if k[1] == name]:
            del self.topic_permissions[tkey]
        for pkey in [k for k in self.policies if k[0] == name]:
            del self.policies[pkey]
        self._changed(VHostDeleted(vhost))

    # -- permissions ----------------------------------------------------------------------

    def _user_and_vhost(self, user: str, vhost: str) -> None:
        if user not in self.users:
            raise NotFound(f"no user '{user}'")
        self._vhost(vhost)

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
        self._vhost(vhost)
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
