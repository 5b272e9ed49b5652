"""The broker facade: the one API protocol adapters and the HTTP layer call."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from functools import partial
from pathlib import Path
from typing import Any

from roost.core.activity import ActivityMixin
from roost.core.admin import AdminMixin
from roost.core.auth import Permission, User, hash_password
from roost.core.client import Client
from roost.core.consumer import Consumer
from roost.core.definitions import export_definitions, import_definitions
from roost.core.durability import MessageStore
from roost.core.errors import AccessRefused, NotAllowed, NotFound
from roost.core.exchanges import Exchange
from roost.core.features.direct_reply import REPLY_TO
from roost.core.flow import Publisher
from roost.core.info import ImportReport
from roost.core.manage import ManageMixin
from roost.core.message import EMPTY_PROPERTIES, Message, Properties
from roost.core.policy import effective_policy
from roost.core.queries import QueriesMixin
from roost.core.queues.base import Entry, Queue
from roost.core.queues.stream import close_streams, sync_streams
from roost.core.queues.stream_recovery import recover_streams
from roost.core.session import DeliverySink, Session
from roost.core.stats import Traffic
from roost.core.vhost import VHost

# Message types are part of the facade: adapters build and read them; adapters count
# their connection's bytes into a Traffic. A request whose reply_to is DIRECT_REPLY_TO
# goes through ``direct_reply_request`` (core.features.direct_reply).
DIRECT_REPLY_TO = REPLY_TO
__all__ = ["DIRECT_REPLY_TO", "EMPTY_PROPERTIES", "Broker", "Message", "Properties", "Traffic"]

log = logging.getLogger("roost.broker")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost", "::ffff:127.0.0.1"})


class Broker(QueriesMixin, ActivityMixin, AdminMixin, ManageMixin):
    """Management queries, definitions and management operations come from the mixins
    (core/queries.py, activity.py, admin.py, manage.py), so this file stays the map."""

    def __init__(
        self, *, loopback_users: Collection[str] = ("guest",), data_dir: Path | None = None
    ) -> None:
        # None keeps everything in memory (unit tests); the server passes --data-dir.
        self.data_dir_path = data_dir
        self.users: dict[str, User] = {}
        self.vhosts: dict[str, VHost] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}
        self.loopback_users = set(loopback_users)
        self.clients: dict[int, Client] = {}
        self._init_management()

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
            vhost = self.vhosts[name] = VHost(name, data_dir=self.data_dir_path)
            vhost.on_change.append(self._count_queue_churn)
            vhost.policy = partial(self._policy_definition, name)
            self._changed("vhost", vhost)
        return vhost

    def add_user(self, name: str, password_hash: str, *, tags: list[str] | None = None) -> User:
        user = User(name, password_hash, list(tags or []))
        self.users[name] = user
        self._changed("user", user)
        return user

    def set_permission(self, user: str, vhost: str, permission: Permission) -> None:
        self.permissions[(user, vhost)] = permission
        self._changed("permission", (user, vhost, permission))

    def export_definitions(self, vhost: str | None = None) -> dict[str, Any]:
        """RabbitMQ's definitions JSON: the whole broker, or one vhost's objects."""
        return export_definitions(self, vhost)

    def import_definitions(
        self, data: Any, vhost: str | None = None, *, creator: str | None = None
    ) -> ImportReport:
        """Additive import; ``creator`` gets full permissions in vhosts it creates."""
        return import_definitions(self, data, vhost, creator=creator)

    # -- connections ----------------------------------------------------------------------

    def authenticate(self, username: str, password: str, *, peer_host: str) -> User:
        """The user, or AccessRefused. Loopback-only users (guest) fail from elsewhere."""
        user = self.users.get(username)
        if user is None or not user.check(password):
            raise AccessRefused(f"invalid credentials for user '{username}'")
        if username in self.loopback_users and peer_host not in LOOPBACK_HOSTS:
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
        self.clients[client.id] = client
        self.counters.connection_created += 1
        return client

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

    def open_session(self, client: Client, sink: DeliverySink, *, number: int = 0) -> Session:
        """``number`` is the channel number the management API shows (0 when none)."""
        session = Session(client, sink)
        session.number = number
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

    def _count_queue_churn(self, kind: str, obj: Any) -> None:
        """A vhost listener: counts created and deleted queues, and keeps the lifetime
        counters of deleted queues and exchanges so overview totals never go down."""
        c = self.counters
        if kind == "queue":
            c.queue_created += 1
        elif kind == "queue.deleted":
            c.queue_deleted += 1
            c.retired_delivered += obj.stat_delivered
            c.retired_acked += obj.stat_acked
            c.retired_redelivered += obj.stat_redelivered
        elif kind == "exchange.deleted":
            c.retired_published_in += obj.stat_in
            c.retired_published_out += obj.stat_out

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
        return client.vhost.declare_exchange(
            name,
            kind,
            passive=passive,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            arguments=arguments,
        )

    def delete_exchange(self, client: Client, name: str, *, if_unused: bool = False) -> None:
        client.vhost.delete_exchange(name, if_unused=if_unused)

    def bind_exchange(
        self, client: Client, destination: str, source: str, key: str, arguments: dict[str, Any]
    ) -> None:
        vhost = client.vhost
        vhost.bind(source, self._exchange_dest(vhost, destination), key, arguments)

    def unbind_exchange(
        self, client: Client, destination: str, source: str, key: str, arguments: dict[str, Any]
    ) -> None:
        vhost = client.vhost
        vhost.unbind(source, self._exchange_dest(vhost, destination), key, arguments)

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
        return client.vhost.declare_queue(
            name,
            client=client,
            passive=passive,
            durable=durable,
            exclusive=exclusive,
            auto_delete=auto_delete,
            arguments=arguments,
        )

    def queue(self, client: Client, name: str) -> Queue:
        return client.vhost.queue(name, client)

    def bind_queue(
        self, client: Client, queue: str, exchange: str, key: str, arguments: dict[str, Any]
    ) -> None:
        if exchange == "":  # RabbitMQ checks this before looking the queue up
            raise AccessRefused("operation not permitted on the default exchange")
        vhost = client.vhost
        vhost.bind(exchange, vhost.queue(queue, client), key, arguments)

    def unbind_queue(
        self, client: Client, queue: str, exchange: str, key: str, arguments: dict[str, Any]
    ) -> None:
        vhost = client.vhost
        try:
            q = vhost.queue(queue, client)
            vhost.exchange(exchange)
        except NotFound:
            return  # RabbitMQ: unbinding something that is not there succeeds
        vhost.unbind(exchange, q, key, arguments)

    def purge_queue(self, client: Client, name: str) -> int:
        return client.vhost.queue(name, client).purge()

    def delete_queue(
        self, client: Client, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
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
    ) -> int:
        """Route and enqueue; returns how many queues took the message.

        ``confirm(ok)`` is called once the message is safe: at once, unless it was written
        to a durable queue's store, then after the group commit that puts it on disk.
        ``publisher`` (from ``new_publisher``) is held while a queue it reached is
        congested."""
        store = self.message_store
        if confirm is None or store is None or message.properties.delivery_mode != 2:
            routed = client.vhost.publish(exchange, message, publisher)
            if confirm is not None:
                confirm(True)
            return routed
        before = store.appends
        routed = client.vhost.publish(exchange, message, publisher)
        if store.appends != before:
            store.when_durable(confirm)
        else:
            confirm(True)
        return routed

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
        queue = session.client.vhost.queue(name, session.client)
        return session.consume(
            queue, tag, no_ack=no_ack, exclusive=exclusive, arguments=arguments
        )

    def check_exchange(self, client: Client, name: str) -> None:
        """Raise NotFound unless the exchange exists (tx publishes are checked early)."""
        client.vhost.exchange(name)

    def vhost(self, name: str) -> VHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            raise NotFound(f"no vhost '{name}'")
        return vhost

    # -- streams --------------------------------------------------------------------------

    def sync_streams(self) -> None:
        """Group commit: fsync every stream appended to since the last call. Adapters call
        it before sending publisher confirms."""
        sync_streams()

    def recover_streams(self) -> int:
        """Reopen the streams found under the data directory (start-up)."""
        if self.data_dir_path is None:
            return 0
        return recover_streams(self, self.data_dir_path)

    def close_streams(self) -> None:
        close_streams()
