"""One module per RabbitMQ management resource; each lists its ``ROUTES``."""

from __future__ import annotations

from roost.http.api import (
    bindings,
    channels,
    connections,
    consumers,
    definitions,
    exchanges,
    federation,
    health,
    limits,
    nodes,
    overview,
    parameters,
    permissions,
    policies,
    profile,
    queues,
    quorum,
    shovels,
    super_streams,
    topic_permissions,
    users,
    vhosts,
    whoami,
)
from roost.http.routes import Route

MODULES = (
    overview,
    nodes,
    vhosts,
    exchanges,
    quorum,
    queues,
    bindings,
    connections,
    channels,
    consumers,
    users,
    permissions,
    topic_permissions,
    limits,
    policies,
    parameters,
    shovels,
    federation,
    definitions,
    super_streams,
    whoami,
    health,
    profile,
)


def all_routes() -> list[Route]:
    return [route for module in MODULES for route in module.ROUTES]
