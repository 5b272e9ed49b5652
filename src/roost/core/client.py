"""A connected client (AMQP or STOMP connection, or an HTTP request) as the core sees it.

Compiled with mypyc (docs/compiled.md): every publish and delivery reads the client's
rights and adds to its counters, and the read loop to its traffic; native fields make
those reads direct."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from roost.core.access import Access
    from roost.core.auth import User
    from roost.core.queues.base import Queue
    from roost.core.session import Session
    from roost.core.vhost import VHost

_ids = itertools.count(1)


class Traffic:
    """Bytes and socket operations of one connection; a protocol adapter adds to it."""

    __slots__ = ("recv_cnt", "recv_oct", "send_cnt", "send_oct")

    def __init__(self) -> None:
        self.recv_oct = 0
        self.send_oct = 0
        self.recv_cnt = 0
        self.send_cnt = 0


# message size histogram bounds, RabbitMQ's (rabbitmq_message_size_bytes); one more
# bucket holds the larger ones
SIZE_BOUNDS: Final = (100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 50_000_000, 100_000_000)


_BOUNDS: Final[list[int]] = list(SIZE_BOUNDS)  # (a list[int]: compiled, iterated natively)


def size_bucket(size: int) -> int:
    """The histogram bucket of a body this long (the publish path tests the two smallest
    bounds inline: most messages are small)."""
    # (a loop, not bisect: compiled, it runs on machine ints, where bisect_left was a
    # Python call that cost 2.5% of the STOMP server with 1 KiB bodies)
    bucket = 0
    for bound in _BOUNDS:
        if size <= bound:
            return bucket
        bucket += 1
    return bucket


# ClientCounts' integer fields, which ``add`` sums by name: a compiled class has no
# __slots__ at run time (tests/core/test_stats.py checks the list is whole)
_COUNTERS = (
    "confirm_received",
    "confirmed",
    "consume_auto_ack",
    "consume_manual_ack",
    "get_auto_ack",
    "get_empty",
    "get_manual_ack",
    "received",
    "returned",
    "size_sum",
    "unroutable",
)


class ClientCounts:
    """One connection's message counters (RabbitMQ's global counters, per protocol, are
    the sums of these over open and closed connections: core/activity.py). The hot path
    adds to them; nothing else happens per message."""

    __slots__ = (*_COUNTERS, "sizes")

    def __init__(self) -> None:
        self.received = 0  # published by the client
        self.confirm_received = 0  # of them, in confirm mode
        self.unroutable = 0  # routed to no queue (returned or dropped)
        self.returned = 0  # of them, returned to a mandatory publisher
        self.confirmed = 0  # confirms sent (acks)
        self.consume_auto_ack = 0
        self.consume_manual_ack = 0
        self.get_auto_ack = 0
        self.get_manual_ack = 0
        self.get_empty = 0
        self.sizes = [0] * (len(SIZE_BOUNDS) + 1)  # received bodies by size_bucket
        self.size_sum = 0  # their bytes (the histogram's _sum)

    def add(self, other: ClientCounts) -> None:
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.sizes = [a + b for a, b in zip(self.sizes, other.sizes, strict=True)]


_MQTT_LABELS = {"3.1": "mqtt310", "3.1.1": "mqtt311", "5.0": "mqtt50"}


def protocol_label(protocol: str) -> str:
    """The ``protocol`` label of RabbitMQ's global counters for a connection's protocol
    ("AMQP 0-9-1" is amqp091, every STOMP flavour stomp, MQTT by version as RabbitMQ
    3.13 labels it: mqtt310, mqtt311, mqtt50, over TCP and WebSocket alike)."""
    p = protocol.lower()
    if "mqtt" in p:
        return _MQTT_LABELS.get(p.rsplit(" ", 1)[-1], "mqtt")
    for label, marker in (("amqp091", "amqp"), ("stomp", "stomp"), ("mqtt", "mqtt")):
        if marker in p:
            return label
    return p.split(" ")[0] or "unknown"


class Client:
    def __init__(
        self,
        *,
        protocol: str,
        peer: str,
        user: User,
        vhost: VHost,
        closer: Callable[[str], None] | None = None,
        properties: dict[str, Any] | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self.id = next(_ids)
        self.protocol = protocol
        self.peer = peer
        self.user = user
        self.vhost = vhost
        self.properties = properties or {}
        self.opened_at = time.time()
        self.sessions: set[Session] = set()
        self.exclusive_queues: set[Queue] = set()
        self._closer = closer
        self.closed_reason: str | None = None
        # set by the protocol adapter while publisher flow control pauses this client
        # (RabbitMQ's connection state "flow")
        self.flow_held = False
        # set by the protocol adapter: a TLS connection, and how the client logged in
        self.ssl = False
        self.auth_mechanism = "PLAIN"
        # set by the adapter while a resource alarm is in effect: "blocking" (will be
        # blocked at its next publish) or "blocked" (RabbitMQ's connection states)
        self.alarm_state = ""
        # bytes in and out, counted by the protocol adapter from the first byte on
        self.traffic = traffic if traffic is not None else Traffic()
        self.counts = ClientCounts()
        # the user's compiled rights in this vhost (core/access.py); None for the broker's
        # own clients (definitions import), which may do anything
        self.access: Access | None = None

    @property
    def name(self) -> str:
        """RabbitMQ's connection name: ``peer -> server`` or the client's connection_name."""
        given = self.properties.get("connection_name")
        return given if isinstance(given, str) and given else self.peer

    def force_close(self, reason: str) -> None:
        """Ask the adapter to close this connection (management, shutdown)."""
        if self._closer is not None:
            self._closer(reason)

    def release(self) -> None:
        """Disconnected: drop the adapter's closer (it refers back to the adapter, which
        refers to this client; without the cycle both go by reference counting)."""
        self._closer = None

    def __repr__(self) -> str:
        return f"<Client {self.id} {self.protocol} {self.peer} user={self.user.name!r}>"
