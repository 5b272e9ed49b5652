"""Application keys and accessors shared by the handlers."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from roost.core.info import UserInfo
from roost.core.ports.management import ManagementPort


@dataclass(frozen=True)
class HttpSettings:
    stats_interval: float = 5.0  # seconds between rate samples
    statsd: str | None = None  # HOST:PORT to push counters to, or None
    statsd_prefix: str = "roost"
    max_body_size: int = 64 * 1024 * 1024  # larger request bodies get 413
    body_timeout: float = 10.0  # seconds a request body may take to arrive (408 after)


PORT = web.AppKey("management", ManagementPort)
SETTINGS = web.AppKey("settings", HttpSettings)
USER_KEY = "roost.user"  # request key of the authenticated UserInfo


def management(request: web.Request) -> ManagementPort:
    """The core's management port (core/ports/management.py): all the API may call."""
    return request.app[PORT]


def user(request: web.Request) -> UserInfo:
    found: UserInfo = request[USER_KEY]
    return found
