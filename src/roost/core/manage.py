"""Queue, exchange, binding and message operations done on behalf of a management user.

``ManageMixin`` is mixed into ``Broker``. Each operation checks the user's configure /
write / read permission as the AMQP method would, then goes through the same facade
methods an AMQP channel uses, with a short-lived client that is never registered as a
connection; so whatever hooks the facade (the durable store) sees these changes too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core.client import Client
from roost.core.errors import NotFound, PreconditionFailed
from roost.core.exchanges.producers import last_publishing_id
from roost.core.info import BindingInfo, FetchedMessage
from roost.core.message import EMPTY_PROPERTIES, Message
from roost.core.queries import properties_key

if TYPE_CHECKING:
    from roost.core.access import Access
    from roost.core.auth import User
    from roost.core.exchanges import Exchange
    from roost.core.queues.base import Queue
    from roost.core.session import Session
    from roost.core.vhost import VHost

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


class ManageMixin:
    if TYPE_CHECKING:
        users: dict[str, User]

        def _vhost(self, name: str) -> VHost: ...
        def access_for(self, user: User, vhost: str) -> Access: ...
        def check_permission(
            self, user: str, vhost: str, access: str, kind: str, name: str
        ) -> None: ...
        # Callable attributes: Broker defines them with their keyword-only arguments
        Args = dict[str, Any]
        declare_queue: Callable[..., Queue]
        delete_queue: Callable[..., int]
        def purge_queue(self, client: Client, name: str) -> int: ...
        declare_exchange: Callable[..., Exchange]
        def delete_exchange(
            self, client: Client, name: str, *, if_unused: bool = False
        ) -> None: ...
        def bind_queue(self, client: Client, q: str, ex: str, key: str, args: Args) -> None: ...
        def unbind_queue(self, client: Client, q: str, ex: str, key: str, args: Args) -> None: ...
        def bind_exchange(self, client: Client, d: str, s: str, key: str, args: Args) -> None: ...
        def unbind_exchange(self, client: Client, d: str, s: str, key: str, args: Args) -> None: ...
        def publish(self, client: Client, exchange: str, message: Message) -> int: ...
        def open_session(self, client: Client, sink: Any) -> Session: ...
        def close_session(self, session: Session) -> None: ...
        def get(self, session: Session, name: str, no_ack: bool) -> Any: ...

    def _acting(self, user: str, vhost: str) -> Client:
        account = self.users.get(user)
        if account is None:
            raise NotFound(f"no user '{user}'")
        client = Client(
            protocol="HTTP", peer="management", user=account, vhost=self._vhost(vhost)
        )
        client.access = self.access_for(account, vhost)  # the checks AMQP and STOMP get
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
        self.check_permission(user, vhost, "configure", "queue", name)
        client = self._acting(user, vhost)
        created = name not in client.vhost.queues
        self.declare_queue(
            client, name, durable=durable, auto_delete=auto_delete, arguments=arguments or {}
        )
        return created

    def mgmt_delete_queue(
        self, user: str, vhost: str, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        self._vhost(vhost).queue(name)  # NotFound: the API answers 404, AMQP succeeds
        self.check_permission(user, vhost, "configure", "queue", name)
        return self.delete_queue(
            self._acting(user, vhost), name, if_unused=if_unused, if_empty=if_empty
        )

    def mgmt_purge_queue(self, user: str, vhost: str, name: str) -> int:
        self._vhost(vhost).queue(name)
        self.check_permission(user, vhost, "read", "queue", name)
        return self.purge_queue(self._acting(user, vhost), name)

    def mgmt_get_messages(
        self, user: str, vhost: str, queue: str, *, count: int, ackmode: str
    ) -> list[FetchedMessage]:
        """basic.get up to ``count`` messages, then settle them all as ``ackmode`` says."""
        requeue = ACK_MODES.get(ackmode)
        if requeue is None:
            raise PreconditionFailed(f"invalid ackmode '{ackmode}'")
        self._vhost(vhost).queue(queue)
        self.check_permission(user, vhost, "read", "queue", queue)
        session = self.open_session(self._acting(user, vhost), _NoDeliveries())
        out: list[FetchedMessage] = []
        try:
            for _ in range(count):
                got = self.get(session, queue, False)
                if got is None:
                    break
                _tag, entry, left = got
                msg = entry.message
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
            self.close_session(session)
        return out

    def mgmt_last_publishing_id(
        self, user: str, vhost: str, stream: str, producer: str
    ) -> int | None:
        """A stream producer's last publishing id (None: the stream knows no such
        producer); read access to the stream, as for the AMQP query."""
        v = self._vhost(vhost)
        self.check_permission(user, vhost, "read", "queue", stream)
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
        self.check_permission(user, vhost, "configure", "exchange", name)
        client = self._acting(user, vhost)
        created = name not in client.vhost.exchanges
        self.declare_exchange(
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
        self._vhost(vhost).exchange(name)
        self.check_permission(user, vhost, "configure", "exchange", name)
        self.delete_exchange(self._acting(user, vhost), name, if_unused=if_unused)

    def mgmt_publish(self, user: str, vhost: str, exchange: str, message: Message) -> bool:
        """Publish one message; True when at least one queue took it."""
        self._vhost(vhost).exchange(exchange)
        self.check_permission(user, vhost, "write", "exchange", exchange or "amq.default")
        return self.publish(self._acting(user, vhost), exchange, message) > 0

    # -- bindings -------------------------------------------------------------------------

    def list_bindings(
        self,
        vhost: str | None = None,
        *,
        source: str | None = None,
        destination: str | None = None,
        destination_type: str | None = None,
    ) -> list[BindingInfo]:
        vhosts = [self._vhost(vhost)] if vhost is not None else list(self.vhosts.values())  # type: ignore[attr-defined]
        out: list[BindingInfo] = []
        for v in vhosts:
            if source is not None:
                v.exchange(source)
            if destination is not None:
                if destination_type == "queue":
                    v.queue(destination)
                else:
                    v.exchange(destination)
            for ex in v.exchanges.values():
                if source is not None and ex.name != source:
                    continue
                if ex.name == "":
                    # the default exchange's implicit bindings, as RabbitMQ lists them
                    bound: list[tuple[Any, str, dict[str, Any]]] = [
                        (q, q.name, {}) for q in v.queues.values()
                    ]
                else:
                    bound = [
                        (b.destination, b.routing_key, b.arguments) for b in ex.bindings.values()
                    ]
                for dest, key, args in bound:
                    dtype = "exchange" if dest.is_exchange else "queue"
                    if destination is not None and (
                        dest.name != destination or dtype != (destination_type or dtype)
                    ):
                        continue
                    out.append(
                        BindingInfo(
                            v.name,
                            ex.name,
                            dest.name,
                            dtype,
                            key,
                            dict(args),
                            properties_key(key, args),
                        )
                    )
        return out

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
        v = self._vhost(vhost)
        v.exchange(source)
        kind = "queue" if destination_type == "queue" else "exchange"
        if kind == "queue":
            v.queue(destination)
        else:
            v.exchange(destination)
        self.check_permission(user, vhost, "write", kind, destination)
        self.check_permission(user, vhost, "read", "exchange", source)
        client = self._acting(user, vhost)
        if kind == "queue":
            self.bind_queue(client, destination, source, routing_key, arguments)
        else:
            self.bind_exchange(client, destination, source, routing_key, arguments)
        return properties_key(routing_key, arguments)

    def binding_info(
        self, vhost: str, source: str, destination_type: str, destination: str, props: str
    ) -> BindingInfo:
        for b in self.list_bindings(
            vhost, source=source, destination=destination, destination_type=destination_type
        ):
            if b.properties_key == props:
                return b
        raise NotFound(f"no binding '{props}' from '{source}' to '{destination}'")

    def mgmt_unbind(
        self,
        user: str,
        vhost: str,
        source: str,
        destination_type: str,
        destination: str,
        props: str,
    ) -> None:
        b = self.binding_info(vhost, source, destination_type, destination, props)
        self.check_permission(user, vhost, "write", b.destination_type, destination)
        self.check_permission(user, vhost, "read", "exchange", source)
        client = self._acting(user, vhost)
        if b.destination_type == "queue":
            self.unbind_queue(client, destination, source, b.routing_key, b.arguments)
        else:
            self.unbind_exchange(client, destination, source, b.routing_key, b.arguments)

    # -- connections and checks -----------------------------------------------------------

    def close_connection(self, name: str, reason: str) -> None:
        """Ask a connection to close from the broker side (AMQP: connection.close 320)."""
        self._client_named(name).force_close(reason)  # type: ignore[attr-defined]

    def aliveness_test(self, user: str, vhost: str) -> None:
        """Declare a queue, publish to it and get the message back (RabbitMQ's check)."""
        self.mgmt_declare_queue(user, vhost, ALIVENESS_QUEUE, durable=False)
        self.check_permission(user, vhost, "write", "exchange", "amq.default")
        self.publish(
            self._acting(user, vhost),
            "",
            Message("", ALIVENESS_QUEUE, EMPTY_PROPERTIES, b"test_message"),
        )
        got = self.mgmt_get_messages(
            user, vhost, ALIVENESS_QUEUE, count=1, ackmode="ack_requeue_false"
        )
        if not got or got[0].body != b"test_message":
            raise PreconditionFailed("aliveness test message did not come back")
