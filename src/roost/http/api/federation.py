"""/api/federation-links, as RabbitMQ 3.10's federation management plugin shapes it:
each link's status (roost.federation, through the management port's parameter
runtime), and restarting one by its id."""

from __future__ import annotations

from roost.http.api.runtime_status import restart_handler, status_handler
from roost.http.routes import Route

COMPONENT = "federation-upstream"
list_links = status_handler(COMPONENT)
restart_link = restart_handler(COMPONENT, "id")

ROUTES = [
    Route(
        "GET", "/api/federation-links", list_links, "Every federation link's status", listing=True
    ),
    Route(
        "GET",
        "/api/federation-links/{vhost}",
        list_links,
        "A vhost's federation links",
        listing=True,
    ),
    Route(
        "DELETE",
        "/api/federation-links/vhost/{vhost}/{id}/restart",
        restart_link,
        "Restart a federation link",
    ),
]
