"""HTTP basic auth against the broker's users, and RabbitMQ's management tag rules.

- ``management``: the API, limited to vhosts the user has permissions in and to the
  user's own connections and channels;
- ``policymaker``: management, plus policies in those vhosts;
- ``monitoring``: management, plus every vhost, connection and channel (read-only), nodes;
- ``administrator``: everything, users, vhosts, permissions and definitions included.

A wrong password is 401; a missing tag or vhost right is 403 (RabbitMQ answers 401 for
both; the issue asks for 403, which also keeps browsers from prompting again).
"""

from __future__ import annotations

import base64
import binascii

from aiohttp import web

from roost.core.errors import AccessRefused
from roost.core.info import UserInfo
from roost.core.ports.management import ManagementPort
from roost.http.util import (
    ADMINISTRATOR,
    MANAGEMENT,
    MONITORING,
    POLICYMAKER,
    HTTPProblem,
    forbidden,
)

LEVEL_TAGS = {
    MANAGEMENT: ("management", "policymaker", "monitoring", "administrator"),
    POLICYMAKER: ("policymaker", "administrator"),
    MONITORING: ("monitoring", "administrator"),
    ADMINISTRATOR: ("administrator",),
}
LEVEL_REFUSAL = {
    MANAGEMENT: "Not management user",
    POLICYMAKER: "Not policymaker user",
    MONITORING: "Not monitor user",
    ADMINISTRATOR: "Not administrator user",
}
REALM = 'Basic realm="Roost Management"'


def authenticate(broker: ManagementPort, request: web.Request) -> UserInfo:
    header = request.headers.get("Authorization", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        raise HTTPProblem(401, "not_authorized", "Login required")
    try:
        username, sep, password = (
            base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        )
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise HTTPProblem(401, "not_authorized", "Malformed credentials") from None
    if not sep:
        raise HTTPProblem(401, "not_authorized", "Malformed credentials")
    try:
        return broker.queries.login(username, password, peer_host=request.remote or "")
    except AccessRefused:
        raise HTTPProblem(401, "not_authorized", "Login failed") from None


def require(user: UserInfo, level: str) -> None:
    tags = LEVEL_TAGS.get(level)
    if tags is not None and not user.has_tag(*tags):
        raise forbidden(LEVEL_REFUSAL[level])


def sees_everything(user: UserInfo) -> bool:
    """Monitoring and administrator users see all vhosts, connections and channels."""
    return user.has_tag("monitoring", "administrator")


def check_vhost(broker: ManagementPort, user: UserInfo, vhost: str) -> None:
    """404 for an unknown vhost, 403 for one the user may not see."""
    broker.queries.check_vhost(vhost)
    if not sees_everything(user) and not broker.queries.can_access_vhost(user.name, vhost):
        raise forbidden("User not authorised to access virtual host")


def check_vhost_write(broker: ManagementPort, user: UserInfo, vhost: str) -> None:
    """Changing things in a vhost needs permissions there, whatever the tags."""
    broker.queries.check_vhost(vhost)
    if not broker.queries.can_access_vhost(user.name, vhost):
        raise forbidden("User not authorised to access virtual host")


def visible(broker: ManagementPort, user: UserInfo, vhost: str) -> bool:
    return sees_everything(user) or broker.queries.can_access_vhost(user.name, vhost)
