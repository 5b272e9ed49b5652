"""What one user may do in one vhost: RabbitMQ's configure / write / read checks.

An ``Access`` is built when a client connects (and rebuilt when the user's permissions
change) from the user's vhost permission and topic permissions, with every regular
expression compiled once. Answers are cached per resource name, so the publish hot path
costs one set lookup. The checks mirror RabbitMQ's table (access-control guide):

=====================  ==========================  ========================  ============
operation              configure                   write                     read
=====================  ==========================  ========================  ============
exchange.declare       exchange (not passive)      alternate exchange (new)  exchange (AE)
exchange.delete        exchange
queue.declare          queue (not passive)         dead-letter exch. (new)   queue (DLX)
queue.delete           queue
exchange.(un)bind                                  destination exchange      source
queue.(un)bind                                     queue                     exchange
basic.publish                                      exchange
basic.get/consume                                                            queue
queue.purge                                                                  queue
=====================  ==========================  ========================  ============

Topic permissions (write / read patterns on routing keys) apply to topic exchanges
only, and only when the user has one for that exchange: write on publish, read on
binding or unbinding a queue or exchange from it. ``{username}`` and ``{vhost}`` in a
pattern are replaced, as RabbitMQ does. Every check happens before the resource is looked
up (RabbitMQ refuses deleting a queue one may not configure even when it does not exist),
and the refusal names the permission and the resource: "configure access to queue 'q' in
vhost '/' refused for user 'u'", the words of current RabbitMQ (3.10 left the permission
out; the issue asks for it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from roost.core.errors import AccessRefused, PreconditionFailed

if TYPE_CHECKING:
    from roost.core.auth import Permission, TopicPermission, User
    from roost.core.message import Message

DEFAULT_EXCHANGE = "amq.default"  # the name RabbitMQ checks and reports for ""
IMPERSONATOR = "impersonator"
_CACHE_MAX = 1024  # resource names remembered per (access kind); then start again


class Exchange(Protocol):
    """What a permission check reads of an exchange (core/exchanges: its type), declared
    here so that the rights below the broker model import nothing of it."""

    @property
    def kind(self) -> str: ...


def _compile(pattern: str) -> re.Pattern[str] | None:
    """None grants nothing: RabbitMQ treats "" as "^$", and no resource is named ""."""
    return re.compile(pattern) if pattern else None


class _Rule:
    """One regular expression and its memo of answers."""

    __slots__ = ("_allowed", "_denied", "_everything", "_pattern")

    def __init__(self, pattern: str | None) -> None:
        self._pattern = _compile(pattern) if pattern is not None else None
        # ".*" (every default user's pattern) matches every name: no memo, which would
        # keep up to 1,024 names a connection alive, each STOMP subscription's random
        # queue name among them (~240 bytes a subscription at 400 a connection)
        self._everything = pattern == ".*"
        self._allowed: set[str] = set()
        self._denied: set[str] = set()

    def allows(self, name: str) -> bool:
        if self._everything:
            return True
        if name in self._allowed:
            return True
        if name in self._denied:
            return False
        ok = self._pattern is not None and self._pattern.search(name) is not None
        memo = self._allowed if ok else self._denied
        if len(memo) >= _CACHE_MAX:
            memo.clear()
        memo.add(name)
        return ok


class Access:
    """The compiled rights of ``user`` in ``vhost``; every check raises AccessRefused."""

    __slots__ = ("_rules", "_topics", "_writable", "impersonator", "user", "vhost")

    def __init__(
        self,
        user: User,
        vhost: str,
        permission: Permission | None,
        topic_permissions: Iterable[TopicPermission] = (),
    ) -> None:
        self.user = user.name
        self.vhost = vhost
        self.impersonator = IMPERSONATOR in user.tags
        self._rules = {
            "configure": _Rule(permission.configure if permission else None),
            "write": _Rule(permission.write if permission else None),
            "read": _Rule(permission.read if permission else None),
        }
        self._writable: set[str] = set()  # exchanges already allowed for publishing
        self._topics: dict[str, dict[str, _Rule]] = {}
        for tp in topic_permissions:
            self._topics[tp.exchange] = {
                "write": _Rule(self._expand(tp.write)),
                "read": _Rule(self._expand(tp.read)),
            }

    def _expand(self, pattern: str) -> str:
        return pattern.replace("{username}", re.escape(self.user)).replace(
            "{vhost}", re.escape(self.vhost)
        )

    # -- resources ------------------------------------------------------------------------

    def check(self, access: str, kind: str, name: str) -> None:
        """``access`` is configure, write or read; ``kind`` is exchange or queue."""
        if kind == "exchange" and name == "":
            name = DEFAULT_EXCHANGE
        if not self._rules[access].allows(name):
            raise AccessRefused(
                f"{access} access to {kind} '{name}' in vhost '{self.vhost}' "
                f"refused for user '{self.user}'"
            )

    def check_publish(
        self, exchange: str, message: Message, exchanges: Mapping[str, Exchange]
    ) -> None:
        """basic.publish: write on the exchange, the topic permission on the routing key,
        then the user-id property. The hot path: one memo lookup when nothing is special."""
        if exchange not in self._writable:
            self.check("write", "exchange", exchange)
            if len(self._writable) >= _CACHE_MAX:
                self._writable.clear()
            self._writable.add(exchange)
        if self._topics:
            ex = exchanges.get(exchange)
            if ex is not None and ex.kind == "topic":
                self.check_topic("write", exchange, message.routing_key)
        user_id = message.properties.user_id
        if user_id is not None:
            self.check_user_id(user_id)

    def check_topic(self, access: str, exchange: str, routing_key: str) -> None:
        rules = self._topics.get(exchange)
        if rules is None:
            return  # no topic permission for this exchange: everything goes
        if not rules[access].allows(routing_key):
            raise AccessRefused(
                f"{access} access to topic '{routing_key}' in exchange '{exchange}' in "
                f"vhost '{self.vhost}' refused for user '{self.user}'"
            )

    # -- message properties ---------------------------------------------------------------

    def check_user_id(self, user_id: str) -> None:
        """A publisher may only claim to be itself, unless tagged ``impersonator``."""
        if user_id == self.user or self.impersonator:
            return
        raise PreconditionFailed(
            f"user_id property set to '{user_id}' but authenticated user was '{self.user}'"
        )
