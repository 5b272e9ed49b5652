"""The broker facade: the one API protocol adapters and the HTTP layer call."""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable, Collection, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from roost.core.access import Access
from roost.core.activity import ActivityMixin
from roost.core.admin import AdminMixin
from roost.core.auth import Permission, User, hash_password
from roost.core.client import Client
from roost.core.consumer import Consumer
from roost.core.definitions import export_definitions, import_definitions
from roost.core.durability import MessageStore
from roost.core.errors import AccessRefused, NotAllowed, NotFound, NotImplementedFeature
from roost.core.events import (
    ACCESS_EVENTS,
    Event,
    ExchangeDeleted,
    PermissionChanged,
    QueueDeclared,
    QueueDeleted,
    UserChanged,
    UserDeleted,
    VHostChanged,
)
from roost.core.exchanges import Exchange
from roost.core.exchanges.offsets import OFFSETS_EXCHANGE, target_stream
from roost.core.exchanges.producers import PRODUCERS_EXCHANGE
from roost.core.exchanges.producers import answer as answer_producer_query
from roost.core.features.consumer_timeout import ACK_TIMEOUT, AckTimeouts
from roost.core.features.direct_reply import REPLY_TO
from roost.core.features.policies import apply_policies
from roost.core.features.ttl import parse_expiration
from roost.core.flow import Publisher
from roost.core.info import ImportReport
from roost.core.manage import ManageMixin
from roost.core.message import EMPTY_PROPERTIES, Message, Properties
from roost.core.policy import effective_policy
from roost.core.queries import QueriesMixin
from roost.core.queues.base import Queue
from roost.core.queues.entry import Entry
from roost.core.queues.streams import Streams
from roost.core.quotas import QuotasMixin
from roost.core.session import DeliverySink, Session
from roost.core.stats import Traffic
from roost.core.vhost import VHost, server_name

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


class Broker(QueriesMixin, ActivityMixin, AdminMixin, ManageMixin, QuotasMixin):
    """Management queries, definitions, management operations and limits come from the
    mixins (core/queries.py, activity.py, admin.py, manage.py, quotas.py), so this file
    stays the map. Every operation a client asks for is checked against its user's
    permissions here (core/access.py), so AMQP, STOMP and HTTP share one set of rules."""

    def __init__(
        self, *, loopback_users: Collection[str] = ("guest",), data_dir: Path | None = None
    ) -> None:
        # The server's --data-dir, for information (None in unit tests): the core opens no
        # files; storage comes in through core.durability's Protocols.
        self.data_dir_path = data_dir
        # stream queues' stores: the server sets ``streams.storage`` (a disk implementation)
        self.streams = Streams()
        self.users: dict[str, User] = {}
        self.vhosts: dict[str, VHost] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}
        self.loopback_users = set(loopback_users)
        self.clients: dict[int, Client] = {}
        # consumer timeout and per-delivery ack deadlines; the server drives its tick
        self.ack_timeouts = AckTimeouts(lambda: self._sessions(None))
        self._init_management()
        self._init_quotas()
        self.on_change.append(self._refresh_access)
        apply_policies(self)  # queue policies take effect now and on every change

    # -- set-up ---------------------------------------------------------------------------

    @classmethod
    def with_defaults(cls, data_dir: Path | None = None) -> Broker:
        """vhost '/', user guest/guest with full rights on it (RabbitMQ's first start)."""
        broker = cls(data_dir=data_dir)
        broker.add_vhost("/")
        broker.add_user("guest", hash_password("guest"), tags=["administrator"])
        broker.set_permission("guest", "/", Permission())
        return broker

    def add_vhost(self, name: str) -> VHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            vhost = self.vhosts[name] = VHost(name, streams=self.streams)
            vhost.on_change.append(self._count_queue_churn)
            vhost.policy = partial(self._policy_definition, name)
            self._changed(VHostChanged(vhost))
        return vhost

    def add_user(self, name: str, password_hash: str, *, tags: list[str] | None = None) -> User:
        user = User(name, password_hash, list(tags or []))
        self.users[name] = user
        self._changed(UserChanged(user))
        return user

    def set_permission(self, user: str, vhost: str, permission: Permission) -> None:
        self.permissions[(user, vhost)] = permission
        self._changed(PermissionChanged(user, vhost, permission))

    def export_definitions(self, vhost: str | None = None) -> dict[str, Any]:
        """RabbitMQ's definitions JSON: the whole broker, or one vhost's objects."""
        return export_definitions(self, vhost)

    def import_definitions(
        self,
        data: Any,
        vhost: str | None = None,
        *,
        creator: str | None = None,
        recovering: bool = False,
    ) -> ImportReport:
        """Additive import; ``creator`` gets full permissions in vhosts it creates;
        ``recovering``: the broker's own saved definitions, at start."""
        return import_definitions(self, data, vhost, creator=creator, recovering=recovering)

    # -- connections ----------------------------------------------------------------------

    def authenticate(
        self, username: str, password: str, *, peer_host: str, protocol: str = "", peer: str = ""
    ) -> User:
        """The user, or AccessRefused. Loopback-only users (guest) fail from elsewhere.
        Every failure is logged with the peer; with ``login_throttle`` on, a host past its
        failed logins per minute is refused without its password being checked."""
        try:
            self.login_throttle.check(peer_host)
            user = self.users.get(username)
            if user is None or not user.check(password):
                self.login_throttle.failed(peer_host)
                raise AccessRefused(f"invalid credentials for user '{username}'")
            if username in self.loopback_users and not is_loopback(peer_host):
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
        user = self.users.get(username)
        if user is None:
            raise AccessRefused(f"user '{username}' (from the client certificate) does not exist")
        if username in self.loopback_users and not is_loopback(peer_host):
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
        vhost = self.vhosts.get(vhost_name)
        if vhost is None:
            raise NotAllowed(f"vhost {vhost_name} not found")
        self.check_connection_limits(user, vhost)
        if (user.name, vhost_name) not in self.permissions:
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
        client.access = self.access_for(user, vhost_name)
        self.clients[client.id] = client
        self.counters.connection_created += 1
        if vhost.events is not None:
            vhost.events.connection_created(client)
        return client

    def access_for(self, user: User, vhost: str) -> Access:
        """``user``'s rights in ``vhost``, compiled (core/access.py)."""
        return Access(
            user,
            vhost,
            self.permissions.get((user.name, vhost)),
            [tp for key, tp in self.topic_permissions.items() if key[:2] == (user.name, vhost)],
        )

    def _refresh_access(self, event: Event) -> None:
        """Permissions, topic permissions or tags changed: connected clients get the new
        rights at once (their answers were cached). A deleted user's limits go too."""
        if isinstance(event, UserDeleted):
            self.user_limits.pop(event.user.name, None)
        if isinstance(event, ACCESS_EVENTS):
            for client in self.clients.values():
                if client.access is not None:
                    # put_user replaces the User object: read the tags from the new one
                    user = self.users.get(client.user.name, client.user)
                    client.access = self.access_for(user, client.vhost.name)

    def disconnect(self, client: Client, reason: str = "") -> None:
        """Free what the client held: sessions (unacked messages requeue), exclusive queues.
        The reason is kept with the connection's last snapshot (``list_connections``)."""
        for session in list(client.sessions):
            self.close_session(session)
        for queue in list(client.exclusive_queues):
            client.vhost.delete_queue(queue)
        if self.clients.pop(client.id, None) is not None:
            client.closed_reason = reason or "closed"
            self._record_closed(client, client.closed_reason)
            if client.vhost.events is not None:
                client.vhost.events.connection_closed(client, client.closed_reason)

    def open_session(self, client: Client, sink: DeliverySink, *, number: int = 0) -> Session:
        """``number`` is the channel number the management API shows (0 when none).
        NotAllowed when the user's max-channels limit is reached."""
        if client.id in self.clients:
            self.check_channel_limit(client)
        session = Session(client, sink)
        session.number = number
        session.ack_timeouts = self.ack_timeouts
        client.sessions.add(session)
        if client.id in self.clients:  # not the management API's short-lived sessions
            self.counters.channel_created += 1
        return session

    def close_session(self, session: Session) -> None:
        if not session.closed and session.client.id in self.clients:
            self.counters.channel_closed += 1
        session.close()
        session.client.sessions.discard(session)

    def _policy_definition(self, vhost: str, kind: str, name: str) -> dict[str, Any] | None:
        """The definition of the policy that applies to an object, read when needed (the
        alternate exchange of an exchange that routed a message nowhere)."""
        matching = [p for (v, _), p in self.policies.items() if v == vhost]
        policy = effective_policy(matching, kind, name) if matching else None
        return None if policy is None else policy.definition

    def _count_queue_churn(self, event: Event) -> None:
        """A vhost listener: counts created and deleted queues, and keeps the lifetime
        counters of deleted queues and exchanges so overview totals never go down."""
        c = self.counters
        match event:
            case QueueDeclared():
                c.queue_created += 1
            case QueueDeleted(queue=q):
                c.queue_deleted += 1
                c.retired_delivered += q.stat_delivered
                c.retired_acked += q.stat_acked
                c.retired_redelivered += q.stat_redelivered
            case ExchangeDeleted(exchange=ex):
                c.retired_published_in += ex.stat_in
                c.retired_published_out += ex.stat_out

    # -- exchanges ------------------------------------------------------------------------

    def declare_exchange(
        self,
        client: Client,
        name: str,
        kind: str,
        *,
        passive: bool = False,
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> Exchange:
        access = client.access
        if access is not None and not passive and name:
            access.check("configure", "exchange", name)
            ae = (arguments or {}).get("alternate-exchange")
            if isinstance(ae, str) and name not in client.vhost.exchanges:
                access.check("read", "exchange", name)
                access.check("write", "exchange", ae)
        return client.vhost.declare_exchange(
            name,
            kind,
            passive=passive,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            arguments=arguments,
            limited=access is not None,  # None: importing or recovering definitions
        )

    def delete_exchange(self, client: Client, name: str, *, if_unused: bool = False) -> None:
        if client.access is not None and name:
            client.access.check("configure", "exchange", name)
        client.vhost.delete_exchange(name, if_unused=if_unused)

    def bind_exchange(
        self, client: Client, destination: str, source: str, key: str, arguments: dict[str, Any]
    ) -> None:
        self._check_bind(client, "exchange", destination, source, key)
        vhost = client.vhost
        vhost.bind(source, self._exchange_dest(vhost, destination), key, arguments)

    def unbind_exchange(
        self, client: Client, destination: str, source: str, key: str, arguments: dict[str, Any]
    ) -> None:
        self._check_bind(client, "exchange", destination, source, key)
        if source == "" or destination == "":
            raise AccessRefused("operation not permitted on the default exchange")
        vhost = client.vhost
        try:
            dest = vhost.exchange(destination)
            vhost.exchange(source)
        except NotFound:
            # RabbitMQ 3.10: unbinding from or to an exchange that is gone succeeds (an
            # auto-delete pair's e2e binding, unbound after the pair went away)
            return
        vhost.unbind(source, dest, key, arguments)

    @staticmethod
    def _check_bind(client: Client, kind: str, destination: str, source: str, key: str) -> None:
        """(un)bind: write on the destination, read on the source, then the source's topic
        permission on the routing key (RabbitMQ's order)."""
        access = client.access
        if access is None or not source or (kind == "exchange" and not destination):
            return  # the default exchange is refused by the vhost, as RabbitMQ does first
        access.check("write", kind, destination)
        access.check("read", "exchange", source)
        ex = client.vhost.exchanges.get(source)
        if ex is not None and ex.kind == "topic":
            access.check_topic("read", source, key)

    @staticmethod
    def _exchange_dest(vhost: VHost, name: str) -> Exchange:
        if name == "":
            raise AccessRefused("operation not permitted on the default exchange")
        return vhost.exchange(name)

    # -- queues ---------------------------------------------------------------------------

    def declare_queue(
        self,
        client: Client,
        name: str,
        *,
        passive: bool = False,
        durable: bool = False,
        exclusive: bool = False,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> Queue:
        self.counters.queue_declared += 1
        access = client.access
        server_named = False
        if access is not None and not passive:
            if not name:  # RabbitMQ checks the name it is about to give the queue
                name, server_named = server_name(), True
            access.check("configure", "queue", name)
            dlx = (arguments or {}).get("x-dead-letter-exchange")
            if isinstance(dlx, str) and name not in client.vhost.queues:
                access.check("read", "queue", name)
                access.check("write", "exchange", dlx)
        queue = client.vhost.declare_queue(
            name,
            client=client,
            passive=passive,
            durable=durable,
            exclusive=exclusive,
            auto_delete=auto_delete,
            arguments=arguments,
            server_named=server_named,
            limited=access is not None,  # None: importing or recovering definitions
        )
        if queue.features is not None:
            queue.features.touch()  # a redeclare renews an x-expires lease
        return queue

    def queue(self, client: Client, name: str) -> Queue:
        return client.vhost.queue(name, client)

    def bind_queue(
        self, client: Client, queue: str, exchange: str, key: str, arguments: dict[str, Any]
    ) -> None:
        if exchange == "":  # RabbitMQ checks this before looking the queue up
            raise AccessRefused("operation not permitted on the default exchange")
        self._check_bind(client, "queue", queue, exchange, key)
        vhost = client.vhost
        vhost.bind(exchange, vhost.queue(queue, client), key, arguments)

    def unbind_queue(
        self, client: Client, queue: str, exchange: str, key: str, arguments: dict[str, Any]
    ) -> None:
        self._check_bind(client, "queue", queue, exchange, key)
        vhost = client.vhost
        try:
            q = vhost.queue(queue, client)
            vhost.exchange(exchange)
        except NotFound:
            return  # RabbitMQ: unbinding something that is not there succeeds
        vhost.unbind(exchange, q, key, arguments)

    def purge_queue(self, client: Client, name: str) -> int:
        if client.access is not None:
            client.access.check("read", "queue", name)
        return client.vhost.queue(name, client).purge()

    def delete_queue(
        self, client: Client, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        if client.access is not None:
            client.access.check("configure", "queue", name)
        return client.vhost.delete_queue_named(
            name, client=client, if_unused=if_unused, if_empty=if_empty
        )

    # -- messages -------------------------------------------------------------------------

    # set by core.persistence when the server runs with a disk store
    message_store: MessageStore | None = None

    def publish(
        self,
        client: Client,
        exchange: str,
        message: Message,
        confirm: Callable[[bool], None] | None = None,
        publisher: Publisher | None = None,
        *,
        refused: Callable[[str], None] | None = None,
    ) -> int:
        """Route and enqueue; returns how many queues took the message.

        ``confirm(ok)`` is called once the message is safe: at once, unless it was written
        to a durable queue's store, then after the group commit that puts it on disk.
        ``refused(reason)`` is called first when a queue or exchange refused the message
        (overflow reject-publish, a mutator): ``confirm(False)`` follows at once.
        ``publisher`` (from ``new_publisher``) is held while a queue it reached is
        congested."""
        if len(message.body) > self.max_message_size:  # the test inline: the hot path
            self.check_message_size(len(message.body))
        access = client.access
        if access is not None:
            access.check_publish(exchange, message, client.vhost.exchanges)
        if exchange.startswith("amq.roost."):  # Roost's own: a query or an offset commit
            if exchange == PRODUCERS_EXCHANGE:  # answered here: it needs the rights
                return self._answer_producer_query(client, message, confirm)
            if exchange == OFFSETS_EXCHANGE and access is not None:
                access.check("read", "queue", target_stream(message))
        if message.properties.expiration is not None:
            parse_expiration(message.properties.expiration)  # refused before routing
        store = self.message_store
        if confirm is None or store is None:
            routed, refusal = client.vhost.publish(exchange, message, publisher)
            if refusal and refused is not None:
                refused(refusal)
            if confirm is not None:
                confirm(not refusal)
            return routed
        # a persistent message to a durable queue, or any message to a stream, bumps
        # ``appends``: its confirm waits for the group commit's fsync
        before = store.appends
        routed, refusal = client.vhost.publish(exchange, message, publisher)
        if refusal:  # a full queue with overflow reject-publish, a mutator: nack at once
            if refused is not None:
                refused(refusal)
            confirm(False)
        elif store.appends != before:
            store.when_durable(confirm)
        else:
            confirm(True)
        return routed

    @staticmethod
    def _answer_producer_query(
        client: Client, message: Message, confirm: Callable[[bool], None] | None
    ) -> int:
        """amq.roost.producers (core/exchanges/producers.py): the reply goes out now; the
        request itself reaches no queue (0), like an offset commit."""
        vhost = client.vhost
        vhost.exchange(PRODUCERS_EXCHANGE).stat_in += 1
        answer_producer_query(vhost, client.access, message)
        if confirm is not None:
            confirm(True)
        return 0

    def run_durably(self, ops: Iterable[Callable[[], None]], done: Callable[[], None]) -> None:
        """Run a transaction's operations; ``done()`` once what they wrote to the store is
        on disk (at once when they wrote nothing), so tx.commit-ok means durable."""
        mark = self.durability_mark()
        for op in ops:
            op()
        if not self.after_durable(mark, lambda _ok: done()):
            done()

    def durability_mark(self) -> int:
        """Where the store's changes stand now: pass it to ``after_durable`` once an
        operation ran, to learn whether that operation wrote anything durable."""
        store = self.message_store
        return store.appends if store is not None else 0

    def after_durable(self, mark: int, done: Callable[[bool], None]) -> bool:
        """True when something durable changed since ``mark`` (a durable definition
        journaled, a persistent message written): ``done(ok)`` is called once it is on
        disk. False when nothing did: ``done`` is never called, reply at once. A
        non-durable declare changes nothing, so its reply never waits."""
        store = self.message_store
        if store is None or store.appends == mark:
            return False
        store.when_durable(done)
        return True

    def direct_reply_request(self, session: Session, message: Message) -> Message:
        """A request published with ``reply_to = DIRECT_REPLY_TO``: the copy whose
        reply_to names this session's reply consumer (PreconditionFailed without one)."""
        return session.client.vhost.replies.request(session, message)

    def new_publisher(self, on_change: Callable[[bool], None]) -> Publisher:
        """Flow control for one publishing session: ``on_change(True)`` when a congested
        queue wants it to stop, ``on_change(False)`` when it may go on (core/flow.py).
        Call ``check_progress()`` about once a second while held, ``close()`` at the end."""
        return Publisher(on_change)

    def get(self, session: Session, name: str, no_ack: bool) -> tuple[int, Entry, int] | None:
        """basic.get: (delivery tag, entry, messages left) or None when empty."""
        access = session.client.access
        if access is not None:
            access.check("read", "queue", name)
        queue = session.client.vhost.queue(name, session.client)
        got = session.get(queue, no_ack)
        if got is None:
            return None
        return got[0], got[1], queue.message_count

    def consume(
        self,
        session: Session,
        name: str,
        tag: str,
        *,
        no_ack: bool,
        exclusive: bool,
        arguments: dict[str, Any] | None = None,
    ) -> Consumer:
        """Register a consumer; call ``session.start(consumer)`` to begin deliveries."""
        if name == REPLY_TO:
            return session.client.vhost.replies.consume(session, tag, no_ack=no_ack)
        access = session.client.access
        if access is not None:
            access.check("read", "queue", name)
        limit = self.consumer_max_per_channel
        if limit and len(session.consumers) >= limit:
            raise NotAllowed(f"reached maximum ({limit}) of consumers per channel")
        queue = session.client.vhost.queue(name, session.client)
        if queue.kind == "quorum" and session.global_prefetch:  # RabbitMQ 3.10: 540
            raise NotImplementedFeature(
                f"queue '{name}' in vhost '{queue.vhost.name}' does not support global qos"
            )
        return session.consume(queue, tag, no_ack=no_ack, exclusive=exclusive, arguments=arguments)

    def check_publish(self, client: Client, exchange: str, message: Message) -> None:
        """What ``publish`` checks before routing: rights (AccessRefused, or
        PreconditionFailed for a foreign user-id), then that the exchange exists
        (NotFound). A transaction checks its publishes when they arrive."""
        self.check_message_size(len(message.body))
        access = client.access
        if access is not None:
            access.check_publish(exchange, message, client.vhost.exchanges)
        client.vhost.exchange(exchange)

    def vhost(self, name: str) -> VHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            raise NotFound(f"no vhost '{name}'")
        return vhost

    def page_out_kept(self, paging: bool) -> None:
        """Memory pressure began (``paging``): queues drop the stored messages they keep
        in memory past their first ``PAGE_WINDOW`` (core.queues.base). When it ends,
        nothing is read back: messages return to memory as they are delivered."""
        if not paging:
            return
        started = time.perf_counter()
        dropped = sum(q.page_out_kept() for v in self.vhosts.values() for q in v.queues.values())
        if dropped:
            log.info("memory pressure: %d stored messages paged out of memory in %.3f s",
                     dropped, time.perf_counter() - started)

    # -- streams --------------------------------------------------------------------------

    def sync_streams(self) -> None:
        """Group commit: fsync every stream appended to since the last call. Adapters call
        it before sending publisher confirms."""
        self.streams.sync()

    def recover_streams(self) -> int:
        """Reopen the streams the stream storage holds (start-up)."""
        return self.streams.recover(self)

    def close_streams(self) -> None:
        self.streams.close()
