"""The adapter port: everything a protocol connection (AMQP, STOMP, and the MQTT and
stream-protocol adapters to come) may ask of the core, as one typed Protocol, plus the
handle types it hands back. ``core.broker.Broker`` implements it.

A connection's life on the port::

    user = port.authenticate(name, password, peer_host=host, protocol="MQTT")
    client = port.connect(user, vhost, protocol="MQTT", peer=peer, closer=close)
    session = port.open_session(client, sink)      # sink: the adapter's DeliverySink
    completion = port.durable_from_here()
    port.declare_queue(client, "q", durable=True)  # definitions: may complete later
    if not completion.then(reply):                 # reply(None) or reply(error)
        reply(None)                                # nothing durable changed: at once
    port.publish(client, "amq.topic", message, confirm=on_confirm, publisher=held)
    consumer = port.consume(session, "q", "tag", no_ack=False, exclusive=False)
    session.start(consumer)                        # deliveries go to sink.deliver
    session.ack(delivery_tag, multiple=False)      # settle: ack / nack / reject
    port.disconnect(client, "closed by the client")

What each call promises:

- Definitions (declare, bind, unbind, delete, purge) apply at once on one node. Take
  ``durable_from_here()`` before and call ``then(done)`` after: ``done(None)`` once the
  change is on disk (a durable queue, a durable binding), ``done(error)`` when it could
  not be made durable. In a cluster the same call completes once every live node applied
  the change, and a commit-time refusal (two nodes racing to declare one queue with
  different arguments) arrives as ``done(PreconditionFailed(...))``. While a completion
  is pending an adapter keeps the order of that channel's operations: it stops taking
  frames from that connection's buffer (and pauses reading) until ``done`` runs.
- ``publish(..., confirm)``: ``confirm(True)`` once the message is safe (at once for a
  transient message or one routed nowhere, after the fsync for a persistent message in
  a durable queue or a stream, after a majority commit for a replicated queue);
  ``confirm(False)`` when a queue refused it. ``publisher`` (``new_publisher``) is held
  while a queue it reached is congested: the adapter stops reading that socket.
- ``declare_queue(..., exclusive=True, auto_delete=True, subscription=True)``: the queue
  of one topic subscription (no arguments); it behaves and is listed as any such queue,
  in less memory (core/queues/subscription.py). It ends with its one consumer, not with
  the connection (it is not among the connection's exclusive queues): the adapter
  consumes it at once, or deletes it when binding or consuming is refused. Its first
  consumer, when no-ack without a prefetch, is the queue itself (the ``Consumer``
  ``consume`` returns; no separate object). Ignored for any other kind of queue.
- Deliveries reach the session's ``DeliverySink`` synchronously; the session's prefetch
  (``set_qos``) bounds them, and settling (``ack``/``nack``/``reject``) frees credit.
- Streams (``is_stream`` … ``super_stream_route``): a producer's last publishing id, a
  consumer's stored offset (stored as given, also backwards), a stream's first and last
  offsets, the offset an offset specification starts at (``resolve_stream_offset``), a
  super stream's partitions (the streams bound to its exchange, in
  ``x-stream-partition-order``) and the partitions bound with one routing key; rights as
  RabbitMQ's stream plugin checks them (read on the stream or the exchange).
- ``count_protocol_error``: an error answer a protocol gave a client, counted for
  Prometheus (``rabbitmq_global_stream_error_<name>_total``).
- ``cluster_name()``: the name a connection announces (AMQP's ``cluster_name`` server
  property), as RabbitMQ's: the ``cluster_name`` global parameter when set, else this
  node's name (``--node-name``), or in a cluster the name of its first node; read at
  every call, so setting the parameter renames the cluster for new connections.
- ``alarms``: subscribe to learn of memory and disk alarms (block publishers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    # the handle types the port hands out and takes back (re-exported for adapters)
    from roost.core.alarms import ResourceAlarms as ResourceAlarms
    from roost.core.auth import User as User
    from roost.core.client import Client as Client
    from roost.core.client import Traffic as Traffic
    from roost.core.completion import Completion as Completion
    from roost.core.consumer import Consumer as Consumer
    from roost.core.delivery_sink import DeliverySink as DeliverySink
    from roost.core.exchanges.base import Exchange as Exchange
    from roost.core.flow import Publisher as Publisher
    from roost.core.message import Message as Message
    from roost.core.queues.base import Queue as Queue
    from roost.core.queues.entry import Entry as Entry
    from roost.core.session import Session as Session


class AdapterPort(Protocol):
    alarms: ResourceAlarms

    # -- connections and sessions ---------------------------------------------------------

    def authenticate(
        self, username: str, password: str, *, peer_host: str, protocol: str = "", peer: str = ""
    ) -> User: ...
    def authenticate_external(self, username: str, *, peer_host: str) -> User: ...
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
    ) -> Client: ...
    def disconnect(self, client: Client, reason: str = "") -> None: ...
    def is_connected(self, client: Client) -> bool: ...
    def has_vhost(self, name: str) -> bool: ...
    def open_session(self, client: Client, sink: DeliverySink, *, number: int = 0) -> Session: ...
    def close_session(self, session: Session) -> None: ...

    # -- definitions ----------------------------------------------------------------------

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
    ) -> Exchange: ...
    def delete_exchange(self, client: Client, name: str, *, if_unused: bool = False) -> None: ...
    def bind_exchange(
        self, client: Client, destination: str, source: str, key: str, arguments: dict[str, Any]
    ) -> None: ...
    def unbind_exchange(
        self, client: Client, destination: str, source: str, key: str, arguments: dict[str, Any]
    ) -> None: ...
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
    ) -> Queue: ...
    def queue(self, client: Client, name: str) -> Queue: ...
    def bind_queue(
        self, client: Client, queue: str, exchange: str, key: str, arguments: dict[str, Any]
    ) -> None: ...
    def unbind_queue(
        self, client: Client, queue: str, exchange: str, key: str, arguments: dict[str, Any]
    ) -> None: ...
    def purge_queue(self, client: Client, name: str) -> int: ...
    def delete_queue(
        self, client: Client, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int: ...

    # -- messages -------------------------------------------------------------------------

    def publish(
        self,
        client: Client,
        exchange: str,
        message: Message,
        confirm: Callable[[bool], None] | None = None,
        publisher: Publisher | None = None,
        *,
        refused: Callable[[str], None] | None = None,
        channel: int = 0,
    ) -> int: ...
    def check_publish(self, client: Client, exchange: str, message: Message) -> None: ...
    def direct_reply_request(self, session: Session, message: Message) -> Message: ...
    def new_publisher(self, on_change: Callable[[bool], None]) -> Publisher: ...
    def get(self, session: Session, name: str, no_ack: bool) -> tuple[int, Entry, int] | None: ...
    # before ``get``: checks as ``get`` does; a cluster's queue homed on another node asks
    # its home for a message, so call ``get`` once ``durable_from_here`` completes
    def prepare_get(self, session: Session, name: str) -> None: ...
    def consume(
        self,
        session: Session,
        name: str,
        tag: str,
        *,
        no_ack: bool,
        exclusive: bool,
        arguments: dict[str, Any] | None = None,
    ) -> Consumer: ...

    # -- streams: what the stream protocol asks beyond publish and consume (stream_queries.py)
    # NotFound: no such stream or exchange; PreconditionFailed: a queue that is not a stream

    def is_stream(self, client: Client, name: str) -> bool: ...
    # ``callback`` once when the stream's leader moves to another node; returns the unwatch
    def watch_stream(
        self, client: Client, name: str, callback: Callable[[], None]
    ) -> Callable[[], None]: ...
    # on a cluster: (leader's address or None while it is down, in-sync replicas'
    # addresses) of a replicated stream; None: this node serves the stream alone
    def stream_hosts(
        self, client: Client, name: str
    ) -> tuple[tuple[str, int] | None, list[tuple[str, int]]] | None: ...
    def stream_sequence(self, client: Client, stream: str, reference: str) -> int | None: ...
    def stream_offset(self, client: Client, stream: str, reference: str) -> int | None: ...
    def store_stream_offset(
        self, client: Client, stream: str, reference: str, offset: int
    ) -> None: ...
    def stream_stats(self, client: Client, stream: str) -> dict[str, int]: ...
    def resolve_stream_offset(
        self, client: Client, stream: str, kind: str, value: int | None
    ) -> int: ...
    # a cluster node with no copy of the stream: True, its leader is asked and
    # ``answered({"value": …} | {"code": "not_found"} | None)`` runs later; False: the
    # four calls above answer here
    def ask_stream_leader(
        self, client: Client, stream: str, question: dict[str, Any],
        answered: Callable[[Any], None],
    ) -> bool: ...  # fmt: skip
    def super_stream_partitions(self, client: Client, name: str) -> list[str]: ...
    def super_stream_route(self, client: Client, name: str, routing_key: str) -> list[str]: ...
    # an error answer given to a client (before or after authentication), by the name
    # RabbitMQ's global counters use: rabbitmq_global_stream_error_<name>_total
    def count_protocol_error(self, protocol: str, name: str, n: int = 1) -> None: ...
    def cluster_name(self) -> str: ...

    # -- the one durability wait ------------------------------------------------------------

    def durable_from_here(self) -> Completion: ...
