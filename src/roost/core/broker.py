"""The broker: the small object that builds the core's components with their settings
and wires them (docs/architecture.md has the map). It is also the adapter port's
implementation (core/ports/adapter.py): connections and sessions here, declarations
(core/declarations.py) and messages (core/messaging.py) handed out as its own methods."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core import stream_queries
from roost.core.alarms import ResourceAlarms
from roost.core.auth import Permission, User, hash_password
from roost.core.catalog import Catalog
from roost.core.client import Client, Traffic
from roost.core.completion import Completion, Pending
from roost.core.connections import Connections, connection_info
from roost.core.declarations import Declarations
from roost.core.delivery_sink import DeliverySink
from roost.core.durability import MessageStore, StreamStorage
from roost.core.errors import AccessRefused, NotAllowed
from roost.core.features.consumer_timeout import ACK_TIMEOUT, AckTimeouts
from roost.core.features.direct_reply import REPLY_TO
from roost.core.features.policies import apply_policies
from roost.core.management import Management
from roost.core.message import EMPTY_PROPERTIES, Message, Properties
from roost.core.messaging import Messaging
from roost.core.paging import Pager
from roost.core.queues.streams import Streams
from roost.core.quotas import Quotas
from roost.core.session import Session
from roost.core.settings import BrokerSettings
from roost.core.stats import Stats
from roost.core.vhost import VHost

# Message types are part of the facade: adapters build and read them; adapters count
# their connection's bytes into a Traffic.
# ACK_TIMEOUT names the consumer argument of a default ack deadline (STOMP's ack-timeout).
# A request whose reply_to is DIRECT_REPLY_TO goes through ``direct_reply_request``
# (core.features.direct_reply).
DIRECT_REPLY_TO = REPLY_TO
__all__ = [
    "ACK_TIMEOUT",
    "DIRECT_REPLY_TO",
    "EMPTY_PROPERTIES",
    "Broker",
    "Message",
    "Properties",
    "Traffic",
]

if TYPE_CHECKING:
    from roost.core.ports.adapter import AdapterPort

log = logging.getLogger("roost.broker")



def is_loopback(host: str) -> bool:
    """RabbitMQ's rabbit_net:is_loopback: all of 127.0.0.0/8, ::1, and IPv4 loopback
    addresses mapped into IPv6 (``::ffff:127.0.0.2``, what a dual-stack socket reports)."""
    try:
        ip = ipaddress.ip_address(host.strip("[]").partition("%")[0])
    except ValueError:
        return host == "localhost"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def resource_alarms(settings: BrokerSettings) -> ResourceAlarms:
    """The memory and disk alarms the settings ask for (made by the server before the
    store, which reports a full disk to them, or by the broker itself)."""
    return ResourceAlarms(
        memory_watermark=settings.vm_memory_high_watermark,
        disk_free_limit=settings.disk_free_limit,
        paging_ratio=settings.vm_memory_high_watermark_paging_ratio,
        data_dir=settings.data_dir,
    )


class Broker:
    """The small object that wires the components, and the adapter port's implementation
    (core/ports/adapter.py): what a protocol connection asks of the core. Every operation
    a client asks for is checked against its user's permissions here (core/access.py), so
    AMQP, STOMP and HTTP share one set of rules.

    Components, each constructed with its settings: ``catalog`` (definitions),
    ``connections`` (the connection registry), ``quotas`` (limits), ``stats`` (counters
    and rates), ``alarms`` (memory and disk), ``streams`` (stream queues' storage) and
    ``management`` (the management port: queries, activity, operations)."""

    def __init__(
        self,
        settings: BrokerSettings | None = None,
        *,
        store: MessageStore,
        stream_storage: StreamStorage,
        alarms: ResourceAlarms | None = None,
        ack_wake: Callable[[float], None] | None = None,
    ) -> None:
        """``store``: where durable queues keep persistent messages and definitions are
        journaled, ``stream_storage`` where streams keep their logs: the server's disk
        store, or their in-memory twins (store/memory.py) for a broker without a data
        directory; ``alarms``: the server's (the disk store reports a full disk to them)
        or a test's own probes, else made from the settings (``resource_alarms``);
        ``ack_wake(delay)``: the clock of acknowledgement deadlines, asked to tick
        within ``delay`` seconds when a nearer deadline appears."""
        self.settings = settings = settings if settings is not None else BrokerSettings()
        self.message_store = store
        self.alarms = alarms if alarms is not None else resource_alarms(settings)
        self.alarms.subscribe_paging(self.page_out_kept)  # memory pressure pages out
        self.streams = Streams(stream_storage)
        # transient messages page out here under memory pressure (core.paging)
        self.pager = Pager(store, self.alarms)
        self.stats = Stats(settings.latency_sample)
        self.connections = Connections(
            self.stats.counters, lambda client: connection_info(client, self.stats.sampler)
        )
        self.catalog = Catalog(
            self.streams, self.pager, self.connections, node=settings.cluster_name
        )
        self.catalog.on_change.append(self.stats.on_catalog_change)
        apply_policies(self.catalog)  # queue policies take effect now and on every change
        self.quotas = Quotas(settings, self.catalog, self.connections)
        # consumer timeout and per-delivery ack deadlines; the server drives its tick
        self.ack_timeouts = AckTimeouts(
            lambda: self.connections.sessions(), settings.consumer_timeout_ms, wake=ack_wake
        )
        # the adapter port's definitions and messages halves, handed out as the broker's own
        d = self.declarations = Declarations(self.stats.counters)
        self.declare_exchange = d.declare_exchange
        self.delete_exchange = d.delete_exchange
        self.bind_exchange = d.bind_exchange
        self.unbind_exchange = d.unbind_exchange
        self.declare_queue = d.declare_queue
        self.queue = d.queue
        self.bind_queue = d.bind_queue
        self.unbind_queue = d.unbind_queue
        self.purge_queue = d.purge_queue
        self.delete_queue = d.delete_queue
        # outcomes decided elsewhere (a cluster's etcd commits, home nodes' confirms)
        self.pending = Pending()
        m = self.messaging = Messaging(
            self.quotas, store, self.pending, self.stats.latency, settings.flow_socket_wait_cap
        )
        self.publish = m.publish
        self.check_publish = m.check_publish
        self.get = m.get
        self.prepare_get = m.prepare_get
        self.consume = m.consume
        self.direct_reply_request = m.direct_reply_request
        self.new_publisher = m.new_publisher
        self.is_stream = stream_queries.is_stream
        # a cluster's running nodes' advertised stream addresses (set by roost.cluster)
        self.stream_addresses: Callable[[], dict[str, stream_queries.Address]] | None = None
        self.stream_sequence = stream_queries.stream_sequence
        self.stream_offset = stream_queries.stream_offset
        self.store_stream_offset = stream_queries.store_stream_offset
        self.stream_stats = stream_queries.stream_stats
        self.resolve_stream_offset = stream_queries.resolve_stream_offset
        self.ask_stream_leader = stream_queries.ask_stream_leader
        self.count_protocol_error = self.stats.counters.count_protocol_error
        self.super_stream_partitions = stream_queries.super_stream_partitions
        self.super_stream_route = stream_queries.super_stream_route
        self.management = Management(
            settings,
            self.catalog,
            self.connections,
            self.stats,
            self.alarms,
            store,
            port=self,
        )

    def watch_stream(
        self, client: Client, name: str, callback: Callable[[], None]
    ) -> Callable[[], None]:
        return client.vhost.streams.watch(client.vhost.name, name, callback)

    def stream_hosts(
        self, client: Client, name: str
    ) -> tuple[stream_queries.Address | None, list[stream_queries.Address]] | None:
        return stream_queries.stream_hosts(client, name, self.stream_addresses)

    def cluster_name(self) -> str:
        return self.management.activity.cluster_name

    # the vhosts by name (tests, recovery)
    @property
    def vhosts(self) -> dict[str, VHost]:
        return self.catalog.vhosts


    # -- set-up ---------------------------------------------------------------------------

    @classmethod
    def with_defaults(
        cls,
        settings: BrokerSettings | None = None,
        *,
        store: MessageStore,
        stream_storage: StreamStorage,
    ) -> Broker:
        """vhost '/', user guest/guest with full rights on it (RabbitMQ's first start)."""
        broker = cls(settings, store=store, stream_storage=stream_storage)
        broker.catalog.add_vhost("/")
        broker.catalog.add_user("guest", hash_password("guest"), tags=["administrator"])
        broker.catalog.set_permission("guest", "/", Permission())
        return broker

    # -- connections ----------------------------------------------------------------------

    def authenticate(
        self, username: str, password: str, *, peer_host: str, protocol: str = "", peer: str = ""
    ) -> User:
        """The user, or AccessRefused. Loopback-only users (guest) fail from elsewhere.
        Every failure is logged with the peer; with login throttling on, a host past its
        failed logins per minute is refused without its password being checked."""
        throttle = self.quotas.login_throttle
        try:
            throttle.check(peer_host)
            user = self.catalog.users.get(username)
            if user is None or not user.check(password):
                throttle.failed(peer_host)
                raise AccessRefused(f"invalid credentials for user '{username}'")
            if username in self.settings.loopback_users and not is_loopback(peer_host):
                raise AccessRefused(f"user '{username}' can only connect via localhost")
        except AccessRefused as exc:
            log.warning(
                "%s login failed for user '%s' from %s: %s",
                protocol or "a",
                username,
                peer or peer_host,
                exc.text,
            )
            raise
        return user

    def authenticate_external(self, username: str, *, peer_host: str) -> User:
        """SASL EXTERNAL: the transport (a verified TLS client certificate) already proved
        who the client is, so no password is checked; the user must still exist, and
        loopback-only users stay loopback-only."""
        user = self.catalog.users.get(username)
        if user is None:
            raise AccessRefused(f"user '{username}' (from the client certificate) does not exist")
        if username in self.settings.loopback_users and not is_loopback(peer_host):
            raise AccessRefused(f"user '{username}' can only connect via localhost")
        return user

    def connect(
        self,
        user: User,
        vhost_name: str,
        *,
        protocol: str,
        peer: str,
        closer: Callable[[str], None] | None = None,
        properties: dict[str, Any] | None = None,
        traffic: Traffic | None = None,
    ) -> Client:
        vhost = self.catalog.vhosts.get(vhost_name)
        if vhost is None:
            raise NotAllowed(f"vhost {vhost_name} not found")
        self.quotas.check_connection_limits(user, vhost)
        if (user.name, vhost_name) not in self.catalog.permissions:
            raise NotAllowed(f"access to vhost '{vhost_name}' refused for user '{user.name}'")
        client = Client(
            protocol=protocol,
            peer=peer,
            user=user,
            vhost=vhost,
            closer=closer,
            properties=properties,
            traffic=traffic,
        )
        client.access = self.catalog.access_for(user, vhost_name)
        self.connections.add(client)
        if vhost.events is not None:
            vhost.events.connection_created(client)
        return client

    def disconnect(self, client: Client, reason: str = "") -> None:
        """Free what the client held: sessions (unacked messages requeue), exclusive queues.
        The reason is kept with the connection's last snapshot (``list_connections``)."""
        for session in list(client.sessions):
            self.close_session(session)
        for queue in list(client.exclusive_queues):
            client.vhost.delete_queue(queue)
        client.release()
        closed_reason = reason or "closed"
        if self.connections.remove(client, closed_reason):
            client.closed_reason = closed_reason
            if client.vhost.events is not None:
                client.vhost.events.connection_closed(client, closed_reason)

    def open_session(self, client: Client, sink: DeliverySink, *, number: int = 0) -> Session:
        """``number`` is the channel number the management API shows (0 when none).
        NotAllowed when the user's max-channels limit is reached."""
        registered = client in self.connections
        if registered:
            self.quotas.check_channel_limit(client)
        session = Session(client, sink)
        session.number = number
        session.ack_timeouts = self.ack_timeouts
        session.latency = self.stats.latency
        client.sessions.add(session)
        if registered:  # not the management API's short-lived sessions
            self.stats.counters.channel_created += 1
        return session

    def close_session(self, session: Session) -> None:
        if not session.closed and session.client in self.connections:
            self.stats.counters.channel_closed += 1
        session.close()
        session.client.sessions.discard(session)

    def durable_from_here(self) -> Completion:
        """The one durability wait: take it, run the operation, then ``then(done)``
        (core.completion.Completion)."""
        return Completion(self.message_store, self.pending)

    def vhost(self, name: str) -> VHost:
        return self.catalog.vhost(name)

    def has_vhost(self, name: str) -> bool:
        return name in self.catalog.vhosts

    def is_connected(self, client: Client) -> bool:
        """Registered and not yet disconnected."""
        return client in self.connections

    def page_out_kept(self, paging: bool) -> None:
        """Memory pressure began (``paging``): queues drop the stored messages they keep
        in memory past their first ``PAGE_WINDOW`` (core.queues.base). When it ends,
        nothing is read back: messages return to memory as they are delivered."""
        if not paging:
            return
        started = time.perf_counter()
        vhosts = self.catalog.vhosts.values()
        dropped = sum(q.page_out_kept() for v in vhosts for q in v.queues.values())
        if dropped:
            log.info("memory pressure: %d stored messages paged out of memory in %.3f s",
                     dropped, time.perf_counter() - started)

    # -- streams --------------------------------------------------------------------------

    def recover_streams(self) -> int:
        """Reopen the streams the stream storage holds (start-up)."""
        return self.streams.recover(self.catalog.vhosts)

    def close_streams(self) -> None:
        self.streams.close()


def adapter_port(broker: Broker) -> AdapterPort:
    """The broker as protocol adapters see it (mypy checks that it implements the port)."""
    return broker
