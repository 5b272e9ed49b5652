"""The management port's implementation (core/ports/management.py): what the HTTP API,
the web UI, metrics and ``roost ctl`` ask of the core.

Four faces, each its own component: ``definitions`` (the catalog: users, vhosts,
permissions, topic permissions, policies, limits), ``queries`` (typed snapshots of
definitions), ``activity`` (connections, channels, consumers, rates, the node, alarms)
and ``operations`` (queue, exchange, binding and message operations done on behalf of a
management user, checked as AMQP would check them). ``durably`` is the one durability
wait, shared with the adapters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.core.activity import Activity
from roost.core.definitions import export_definitions, import_definitions
from roost.core.manage import Operations
from roost.core.queries import Queries

if TYPE_CHECKING:
    from roost.core.alarms import ResourceAlarms
    from roost.core.catalog import Catalog
    from roost.core.completion import Completion
    from roost.core.connections import Connections
    from roost.core.durability import MessageStore
    from roost.core.info import ImportReport
    from roost.core.ports.adapter import AdapterPort
    from roost.core.ports.management import ManagementPort
    from roost.core.settings import BrokerSettings
    from roost.core.stats import Stats


class Management:
    def __init__(
        self,
        settings: BrokerSettings,
        catalog: Catalog,
        connections: Connections,
        stats: Stats,
        alarms: ResourceAlarms,
        store: MessageStore,
        *,
        port: AdapterPort,
    ) -> None:
        """``port``: the broker's adapter port; operations on behalf of a management user
        go through it, as a protocol connection's would."""
        self._port = port
        self.definitions = catalog
        self.parameters = catalog.parameters
        self.queries = Queries(catalog, connections, stats.sampler, port.authenticate)
        self.activity = Activity(settings, catalog, connections, stats, alarms, store)
        self.operations = Operations(port, catalog, connections, self.queries)

    def export_definitions(self, vhost: str | None = None) -> dict[str, Any]:
        """RabbitMQ's definitions JSON: the whole broker, or one vhost's objects."""
        return export_definitions(self.definitions, vhost)

    def import_definitions(
        self, data: Any, vhost: str | None = None, *, creator: str | None = None
    ) -> ImportReport:
        """Additive import; ``creator`` gets full permissions in vhosts it creates."""
        return import_definitions(self.definitions, self._port, data, vhost, creator=creator)

    def durable_from_here(self) -> Completion:
        """The one durability wait: what changes from now on, ``then(done)`` tells when
        it is durable (core.completion.Completion)."""
        return self._port.durable_from_here()


def management_port(management: Management) -> ManagementPort:
    """As the HTTP layer sees it (mypy checks that it implements the port)."""
    return management
