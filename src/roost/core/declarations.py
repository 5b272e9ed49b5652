"""Declaring, binding, unbinding, purging and deleting exchanges and queues on behalf of
a client, each checked against the client's rights first (core/access.py), in RabbitMQ's
order. Part of the adapter port (core/ports/adapter.py): the broker hands these methods
to protocol adapters, and the management operations go through them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.core.errors import AccessRefused, NotFound
from roost.core.vhost import server_name

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.exchanges import Exchange
    from roost.core.queues.base import Queue
    from roost.core.stats import Counters
    from roost.core.vhost import VHost


class Declarations:
    def __init__(self, counters: Counters) -> None:
        self._counters = counters

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
        subscription: bool = False,
    ) -> Queue:
        self._counters.queue_declared += 1
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
            subscription=subscription,
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
