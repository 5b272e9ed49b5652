"""The core's components built on their own, each with just what it is constructed
with (as Broker wires them), for the tests beside this file."""

from __future__ import annotations

from dataclasses import dataclass, field

from roost.core.alarms import ResourceAlarms
from roost.core.auth import Permission, User
from roost.core.catalog import Catalog
from roost.core.client import Client
from roost.core.connections import Connections, connection_info
from roost.core.events import Event
from roost.core.paging import Pager
from roost.core.queues.streams import Streams
from roost.core.stats import Stats
from roost.store.memory import MemoryStore
from roost.store.memory_streams import MemoryStreams


def quiet_alarms() -> ResourceAlarms:
    """Alarms whose probes report plenty of memory and disk."""
    return ResourceAlarms(memory_total=1 << 40, memory_probe=lambda: 0,
                          disk_probe=lambda _dir: 1 << 50, heap_trim=None)  # fmt: skip


@dataclass
class Parts:
    stats: Stats
    connections: Connections
    catalog: Catalog
    heard: list[Event] = field(default_factory=list)

    def client(self, user: str = "guest", vhost: str = "/", peer: str = "127.0.0.1:5000") -> Client:
        """A registered connection, as Broker.connect makes one."""
        account = self.catalog.users[user]
        client = Client(protocol="test", peer=peer, user=account, vhost=self.catalog.vhosts[vhost])
        client.access = self.catalog.access_for(account, vhost)
        self.connections.add(client)
        return client


def parts() -> Parts:
    """stats, connections and catalog, with vhost '/' and guest on it; every catalog
    event is recorded in ``heard``."""
    stats = Stats()
    connections = Connections(stats.counters, lambda c: connection_info(c, stats.sampler))
    pager = Pager(MemoryStore(), quiet_alarms())
    catalog = Catalog(Streams(MemoryStreams()), pager, connections)
    catalog.on_change.append(stats.on_catalog_change)
    got = Parts(stats, connections, catalog)
    catalog.on_change.append(got.heard.append)
    catalog.add_vhost("/")
    catalog.users["guest"] = User("guest", "")
    catalog.set_permission("guest", "/", Permission())
    return got
