"""/api/shovels, as RabbitMQ 3.10's shovel management plugin shapes it: the status of
each dynamic shovel (roost.shovel, through the management port's parameter runtime),
and restarting one."""

from __future__ import annotations

from roost.http.api.runtime_status import restart_handler, status_handler
from roost.http.routes import Route

COMPONENT = "shovel"
list_shovels = status_handler(COMPONENT)
restart_shovel = restart_handler(COMPONENT, "name")

ROUTES = [
    Route("GET", "/api/shovels", list_shovels, "Every dynamic shovel's status", listing=True),
    Route("GET", "/api/shovels/{vhost}", list_shovels, "A vhost's shovels", listing=True),
    Route(
        "DELETE",
        "/api/shovels/vhost/{vhost}/{name}/restart",
        restart_shovel,
        "Restart a dynamic shovel",
    ),
]
