"""Queue, exchange, binding and message operations done on behalf of a management user.

Part of the management port (core/ports/management.py). Each operation checks the
user's configure / write / read permission as the AMQP method would, then goes through
the same broker methods an AMQP channel uses (the adapter port), with a short-lived
client that is never registered as a connection; so whatever follows those changes (the
durable store) sees these too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.core.client import Client
from roost.core.errors import NotFound, PreconditionFailed
from roost.core.exchanges.producers import last_publishing_id
from roost.core.info import FetchedMessage
from roost.core.message import EMPTY_PROPERTIES, Message
from roost.core.queries import properties_key

if TYPE_CHECKING:
    from roost.core.catalog import Catalog
    from roost.core.connections import Connections
    from roost.core.ports.adapter import AdapterPort
    from roost.core.queries import Queries

# ackmode of the management API's "get messages": (acknowledge?, requeue?)
ACK_MODES = {
    "ack_requeue_true": True,
    "reject_requeue_true": True,
    "ack_requeue_false": False,
    "reject_requeue_false": False,
}
ALIVENESS_QUEUE = "aliveness-test"


class _NoDeliveries:
    """The sink of a management session: it only ever does basic.get."""

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Any
    ) -> None:
        raise AssertionError("management sessions never consume")

    def consumer_cancelled(self, consumer_tag: str) -> None:
        pass

    def close_with(self, error: Any) -> None:
        pass  # a management session lives for one request


class Operations:
    def __init__(
        self, broker: AdapterPort, catalog: Catalog, connections: Connections, queries: Queries
    ) -> None:
        self._broker = broker
        self._catalog = catalog
        self._connections = connections
        self._queries = queries

    def _acting(self, user: str, vhost: str) -> Client:
        account = self._catalog.users.get(user)
        if account is None:
            raise NotFound(f"no user '{user}'")
        client = Client(
            protocol="HTTP", peer="management", user=account, vhost=self._catalog.vhost(vhost)
        )
        client.access = self._catalog.access_for(account, vhost)  # the checks AMQP and STOMP get
        return client

    # -- queues ---------------------------------------------------------------------------

    def mgmt_declare_queue(
        self,
        user: str,
        vhost: str,
        name: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> bool:
        """Declare (idempotently, with RabbitMQ's equivalence check); True when created."""
        if not name or name.startswith("amq."):
            raise PreconditionFailed(f"queue name '{name}' is not allowed")
        self._catalog.check_permission(user, vhost, "configure", "queue", name)
        client = self._acting(user, vhost)
        created = name not in client.vhost.queues
        self._broker.declare_queue(
            client, name, durable=durable, auto_delete=auto_delete, arguments=arguments or {}
        )
        return created

    def mgmt_delete_queue(
        self, user: str, vhost: str, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        self._catalog.vhost(vhost).queue(name)  # NotFound: the API answers 404, AMQP succeeds
        self._catalog.check_permission(user, vhost, "configure", "queue", name)
        return self._broker.delete_queue(
            self._acting(user, vhost), name, if_unused=if_unused, if_empty=if_empty
        )

    def mgmt_purge_queue(self, user: str, vhost: str, name: str) -> int:
        self._catalog.vhost(vhost).queue(name)
        self._catalog.check_permission(user, vhost, "read", "queue", name)
        return self._broker.purge_queue(self._acting(user, vhost), name)

    def mgmt_get_messages(
        self, user: str, vhost: str, queue: str, *, count: int, ackmode: str
    ) -> list[FetchedMessage]:
        """basic.get up to ``count`` messages, then settle them all as ``ackmode`` says."""
        requeue = ACK_MODES.get(ackmode)
        if requeue is None:
            raise PreconditionFailed(f"invalid ackmode '{ackmode}'")
        self._catalog.vhost(vhost).queue(queue)
        self._catalog.check_permission(user, vhost, "read", "queue", queue)
        session = self._broker.open_session(self._acting(user, vhost), _NoDeliveries())
        out: list[FetchedMessage] = []
        try:
            for _ in range(count):
                got = self._broker.get(session, queue, False)
                if got is None:
                    break
                _tag, entry, left = got
                msg = entry.message
                assert msg is not None  # a basic.get loads a paged-out message
                out.append(
                    FetchedMessage(
                        exchange=msg.exchange,
                        routing_key=msg.routing_key,
                        redelivered=entry.redelivered,
                        properties=msg.properties.as_dict(),
                        body=bytes(msg.body),
                        message_count=left,
                    )
                )
            if out:
                if requeue:
                    session.nack(0, True, True)
                elif ackmode.startswith("ack"):
                    session.ack(0, True)
                else:
                    session.nack(0, True, False)
        finally:
            self._broker.close_session(session)
        return out

    def mgmt_last_publishing_id(
        self, user: str, vhost: str, stream: str, producer: str
    ) -> int | None:
        """A stream producer's last publishing id (None: the stream knows no such
        producer); read access to the stream, as for the AMQP query."""
        v = self._catalog.vhost(vhost)
        self._catalog.check_permission(user, vhost, "read", "queue", stream)
        return last_publishing_id(v, None, stream, producer)

    # -- exchanges ------------------------------------------------------------------------

    def mgmt_declare_exchange(
        self,
        user: str,
        vhost: str,
        name: str,
        kind: str,
        *,
        durable: bool = True,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> bool:
        self._catalog.check_permission(user, vhost, "configure", "exchange", name)
        client = self._acting(user, vhost)
        created = name not in client.vhost.exchanges
        self._broker.declare_exchange(
            client,
            name,
            kind,
            durable=durable,
            auto_delete=auto_delete,
            internal=internal,
            arguments=arguments or {},
        )
        return created

    def mgmt_delete_exchange(
        self, user: str, vhost: str, name: str, *, if_unused: bool = False
    ) -> None:
        self._catalog.vhost(vhost).exchange(name)
        self._catalog.check_permission(user, vhost, "configure", "exchange", name)
        self._broker.delete_exchange(self._acting(user, vhost), name, if_unused=if_unused)

    def mgmt_publish(self, user: str, vhost: str, exchange: str, message: Message) -> bool:
        """Publish one message; True when at least one queue took it."""
        self._catalog.vhost(vhost).exchange(exchange)
        self._catalog.check_permission(user, vhost, "write", "exchange", exchange or "amq.default")
        return self._broker.publish(self._acting(user, vhost), exchange, message) > 0

    # -- bindings -------------------------------------------------------------------------

    def mgmt_bind(
        self,
        user: str,
        vhost: str,
        source: str,
        destination_type: str,
        destination: str,
        routing_key: str,
        arguments: dict[str, Any],
    ) -> str:
        """Bind; returns the binding's properties key (the last segment of its path)."""
        v = self._catalog.vhost(vhost)
        v.exchange(source)
        kind = "queue" if destination_type == "queue" else "exchange"
        if kind == "queue":
            v.queue(destination)
        else:
            v.exchange(destination)
        self._catalog.check_permission(user, vhost, "write", kind, destination)
        self._catalog.check_permission(user, vhost, "read", "exchange", source)
        client = self._acting(user, vhost)
        if kind == "queue":
            self._broker.bind_queue(client, destination, source, routing_key, arguments)
        else:
            self._broker.bind_exchange(client, destination, source, routing_key, arguments)
        return properties_key(routing_key, arguments)

    def mgmt_unbind(
        self,
        user: str,
        vhost: str,
        source: str,
        destination_type: str,
        destination: str,
        props: str,
    ) -> None:
        b = self._queries.binding_info(vhost, source, destination_type, destination, props)
        self._catalog.check_permission(user, vhost, "write", b.destination_type, destination)
        self._catalog.check_permission(user, vhost, "read", "exchange", source)
        client = self._acting(user, vhost)
        if b.destination_type == "queue":
            self._broker.unbind_queue(client, destination, source, b.routing_key, b.arguments)
        else:
            self._broker.unbind_exchange(client, destination, source, b.routing_key, b.arguments)

    # -- connections and checks -----------------------------------------------------------

    def close_connection(self, name: str, reason: str) -> None:
        """Ask a connection to close from the broker side (AMQP: connection.close 320)."""
        self._connections.named(name).force_close(reason)

    def aliveness_test(self, user: str, vhost: str) -> None:
        """Declare a queue, publish to it and get the message back (RabbitMQ's check)."""
        self.mgmt_declare_queue(user, vhost, ALIVENESS_QUEUE, durable=False)
        self._catalog.check_permission(user, vhost, "write", "exchange", "amq.default")
        self._broker.publish(
            self._acting(user, vhost),
            "",
            Message("", ALIVENESS_QUEUE, EMPTY_PROPERTIES, b"test_message"),
        )
        got = self.mgmt_get_messages(
            user, vhost, ALIVENESS_QUEUE, count=1, ackmode="ack_requeue_false"
        )
        if not got or got[0].body != b"test_message":
            raise PreconditionFailed("aliveness test message did not come back")
