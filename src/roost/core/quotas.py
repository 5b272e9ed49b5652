"""Connection, channel, consumer and message-size limits, and failed-login throttling.

Limits come from three places, as in RabbitMQ: the server's settings
(``max_connections`` for the whole broker, ``consumer_max_per_channel``,
``max_message_size``), per-vhost limits (``max-connections``, ``max-queues``: RabbitMQ's
vhost-limits, and ``max-exchanges``, which RabbitMQ 3.10 does not have) and per-user
limits (``max-connections``, ``max-channels``: RabbitMQ's user limits). The per-vhost and
per-user values are definitions (core/catalog.py); this component enforces them. A
negative value or no value means no limit; 0 allows none. Refusals read like RabbitMQ's.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from roost.core.errors import AccessRefused, NotAllowed, PreconditionFailed

if TYPE_CHECKING:
    from roost.core.auth import User
    from roost.core.catalog import Catalog
    from roost.core.client import Client
    from roost.core.connections import Connections
    from roost.core.settings import BrokerSettings
    from roost.core.vhost import VHost


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


class Quotas:
    def __init__(
        self, settings: BrokerSettings, catalog: Catalog, connections: Connections
    ) -> None:
        self.max_connections = settings.max_connections
        self.consumer_max_per_channel = settings.consumer_max_per_channel
        self.max_message_size = settings.max_message_size
        self.login_throttle = LoginThrottle(settings.max_failed_logins_per_minute)
        self._catalog = catalog
        self._connections = connections

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
        clients = self._connections.clients.values()
        if _reached(self.max_connections or None, len(self._connections)):
            raise NotAllowed(
                f"connection refused: node connection limit ({self.max_connections}) is reached"
            )
        limit = vhost.limits.get("max-connections")
        if _reached(limit, sum(1 for c in clients if c.vhost is vhost)):
            raise NotAllowed(
                f"access to vhost '{vhost.name}' refused for user '{user.name}': "
                f"connection limit ({limit}) is reached"
            )
        limit = self._catalog.user_limits.get(user.name, {}).get("max-connections")
        if _reached(limit, sum(1 for c in clients if c.user.name == user.name)):
            raise NotAllowed(
                f"connection refused for user '{user.name}': "
                f"user connection limit ({limit}) is reached"
            )

    def check_consumer_limit(self, consumers: int) -> None:
        """Before a consumer starts on a channel that has ``consumers`` already."""
        limit = self.consumer_max_per_channel
        if limit and consumers >= limit:
            raise NotAllowed(f"reached maximum ({limit}) of consumers per channel")

    def check_channel_limit(self, client: Client) -> None:
        """Before a channel opens on a registered connection."""
        limit = self._catalog.user_limits.get(client.user.name, {}).get("max-channels")
        if limit is None or limit < 0:
            return
        name = client.user.name
        count = sum(len(c.sessions) for c in self._connections if c.user.name == name)
        if count >= limit:
            raise NotAllowed(
                f"number of channels opened for user '{name}' has reached the maximum "
                f"allowed user limit of ({limit})"
            )
