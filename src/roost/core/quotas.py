"""Connection, channel, queue and consumer limits, and failed-login throttling.

``QuotasMixin`` is mixed into ``Broker``. Limits come from three places, as in RabbitMQ:
the server's settings (``max_connections`` for the whole broker, ``consumer_max_per_channel``,
``max_message_size``),
per-vhost limits (``max-connections``, ``max-queues``: RabbitMQ's vhost-limits, and
``max-exchanges``, which RabbitMQ 3.10 does not have) and per-user
limits (``max-connections``, ``max-channels``: RabbitMQ's user limits). A negative value or
no value means no limit; 0 allows none. Refusals read like RabbitMQ's.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from roost.core.errors import AccessRefused, NotAllowed, NotFound, PreconditionFailed
from roost.core.events import BrokerEvent, UserLimitsChanged, VHostLimitsChanged

if TYPE_CHECKING:
    from roost.core.auth import User
    from roost.core.client import Client
    from roost.core.vhost import VHost

VHOST_LIMITS = ("max-connections", "max-queues", "max-exchanges")
USER_LIMITS = ("max-connections", "max-channels")


def limit_value(name: str, value: Any, allowed: tuple[str, ...]) -> int:
    if name not in allowed:
        raise PreconditionFailed(
            f"unknown limit '{name}'; known limits are {', '.join(allowed)}"
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise PreconditionFailed(f"value of limit '{name}' must be an integer")
    return value


def _reached(limit: int | None, count: int) -> bool:
    return limit is not None and limit >= 0 and count >= limit


class LoginThrottle:
    """Failed logins per peer host in the last minute; past the limit a host is refused
    without its password being checked (bcrypt is slow on purpose: no free CPU for
    guessers). ``per_minute`` 0 turns it off."""

    WINDOW = 60.0

    def __init__(self, per_minute: int = 0) -> None:
        self.per_minute = per_minute
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, host: str, now: float) -> deque[float] | None:
        times = self._failures.get(host)
        if times is None:
            return None
        while times and now - times[0] >= self.WINDOW:
            times.popleft()
        if not times:
            del self._failures[host]
            return None
        return times

    def check(self, host: str) -> None:
        if self.per_minute <= 0:
            return
        times = self._recent(host, time.monotonic())
        if times is not None and len(times) >= self.per_minute:
            raise AccessRefused(
                f"too many failed logins from {host} "
                f"(more than {self.per_minute} in a minute); try again later"
            )

    def failed(self, host: str) -> None:
        if self.per_minute <= 0:
            return
        now = time.monotonic()
        times = self._recent(host, now)
        if times is None:
            times = self._failures[host] = deque()
        times.append(now)
        if len(self._failures) > 10_000:  # a scan from many hosts: forget the stalest
            for stale in list(self._failures)[:1000]:
                del self._failures[stale]


class QuotasMixin:
    if TYPE_CHECKING:
        users: dict[str, User]
        vhosts: dict[str, VHost]
        clients: dict[int, Client]

        def _changed(self, event: BrokerEvent) -> None: ...
        def _vhost(self, name: str) -> VHost: ...

    def _init_quotas(self) -> None:
        self.max_connections = 0  # the whole broker; 0 = no limit (--max-connections)
        self.consumer_max_per_channel = 0  # 0 = no limit (--consumer-max-per-channel)
        # --max-message-size, RabbitMQ's default; AMQP refuses a bigger message earlier,
        # from its content header (amqp/connection.py), the rest in check_message_size
        self.max_message_size = 128 * 1024 * 1024
        self.user_limits: dict[str, dict[str, int]] = {}
        self.login_throttle = LoginThrottle()

    # -- vhost limits (RabbitMQ's /api/vhost-limits) --------------------------------------

    def put_vhost_limit(self, vhost: str, name: str, value: Any) -> None:
        v = self._vhost(vhost)
        v.limits[name] = limit_value(name, value, VHOST_LIMITS)
        self._changed(VHostLimitsChanged(v))

    def delete_vhost_limit(self, vhost: str, name: str) -> None:
        v = self._vhost(vhost)
        if v.limits.pop(name, None) is None:
            raise NotFound(f"no limit '{name}' in vhost '{vhost}'")
        self._changed(VHostLimitsChanged(v))

    def vhost_limits(self, vhost: str | None = None) -> list[tuple[str, dict[str, int]]]:
        """(vhost, limits) for each vhost that has some (or the one asked for)."""
        vhosts = [self._vhost(vhost)] if vhost is not None else self.vhosts.values()
        return [(v.name, dict(v.limits)) for v in vhosts if v.limits]

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

    def list_user_limits(self, user: str | None = None) -> list[tuple[str, dict[str, int]]]:
        if user is not None and user not in self.users:
            raise NotFound(f"no user '{user}'")
        return [
            (name, dict(limits))
            for name, limits in self.user_limits.items()
            if limits and (user is None or name == user)
        ]

    # -- checks ---------------------------------------------------------------------------

    def check_message_size(self, size: int) -> None:
        """Every publish (STOMP, HTTP; AMQP checks it from the content header): RabbitMQ's
        406 words."""
        if size > self.max_message_size:
            raise PreconditionFailed(
                f"message size {size} is larger than configured max size {self.max_message_size}"
            )

    def check_connection_limits(self, user: User, vhost: VHost) -> None:
        """Before a connection opens; NotAllowed (AMQP 530) names the limit reached."""
        clients = self.clients.values()
        if _reached(self.max_connections or None, len(self.clients)):
            raise NotAllowed(
                f"connection refused: node connection limit ({self.max_connections}) is reached"
            )
        limit = vhost.limits.get("max-connections")
        if _reached(limit, sum(1 for c in clients if c.vhost is vhost)):
            raise NotAllowed(
                f"access to vhost '{vhost.name}' refused for user '{user.name}': "
                f"connection limit ({limit}) is reached"
            )
        limit = self.user_limits.get(user.name, {}).get("max-connections")
        if _reached(limit, sum(1 for c in clients if c.user.name == user.name)):
            raise NotAllowed(
                f"connection refused for user '{user.name}': "
                f"user connection limit ({limit}) is reached"
            )

    def check_channel_limit(self, client: Client) -> None:
        """Before a channel opens on a registered connection."""
        limit = self.user_limits.get(client.user.name, {}).get("max-channels")
        if limit is None or limit < 0:
            return
        name = client.user.name
        count = sum(len(c.sessions) for c in self.clients.values() if c.user.name == name)
        if count >= limit:
            raise NotAllowed(
                f"number of channels opened for user '{name}' has reached the maximum "
                f"allowed user limit of ({limit})"
            )
