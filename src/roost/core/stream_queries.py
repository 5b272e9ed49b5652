"""What the stream protocol asks of a stream beyond publish and consume: a producer's
last publishing id, a consumer's stored offset (read and write), a stream's figures, the
offset an offset specification starts at, and
a super stream's partitions and routes. Each call checks the client's rights as
RabbitMQ's stream plugin does (read on the stream for the queries and for storing an
offset; read on the super stream's exchange for Route and Partitions), then answers from
the live objects. Half of the adapter port (core/ports/adapter.py), wired by the broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.core.errors import BrokerError, NotFound, PreconditionFailed
from roost.core.queues.stream import StreamQueue

if TYPE_CHECKING:
    from roost.core.client import Client
    from roost.core.exchanges.base import Exchange

# the binding argument RabbitMQ puts on a super stream's partition bindings
PARTITION_ORDER = "x-stream-partition-order"


def _stream(client: Client, name: str) -> StreamQueue:
    if client.access is not None:
        client.access.check("read", "queue", name)
    queue = client.vhost.queues.get(name)
    if queue is None or queue.deleted:
        raise NotFound(f"no queue '{name}' in vhost '{client.vhost.name}'")
    if not isinstance(queue, StreamQueue):
        raise PreconditionFailed(f"queue '{name}' in vhost '{client.vhost.name}' is not a stream")
    return queue


def _any_stream(client: Client, name: str) -> Any:
    """A stream here, or a cluster's stand-in for a replicated stream led elsewhere
    (``kind`` "stream"): both answer ``last_publishing_id``, ``stored_offset``,
    ``commit_offset`` and ``start_offset``; the stand-in ``committed_range`` too."""
    if client.access is not None:
        client.access.check("read", "queue", name)
    queue = client.vhost.queues.get(name)
    if queue is not None and not queue.deleted and queue.kind == "stream":
        return queue
    return _stream(client, name)  # its error


def stream_sequence(client: Client, stream: str, reference: str) -> int | None:
    """The last publishing id ``stream`` stored for the producer ``reference``."""
    last: int | None = _any_stream(client, stream).last_publishing_id(reference)
    return last


def stream_offset(client: Client, stream: str, reference: str) -> int | None:
    """The offset stored for the consumer ``reference`` (None: none stored)."""
    stored: int | None = _any_stream(client, stream).stored_offset(reference)
    return stored


def store_stream_offset(client: Client, stream: str, reference: str, offset: int) -> None:
    """Store a consumer's offset as it says (also backwards, as RabbitMQ does); on a
    node that does not lead a replicated stream, its stand-in sends it to the leader."""
    _any_stream(client, stream).commit_offset(reference, offset)


def stream_stats(client: Client, stream: str) -> dict[str, int]:
    """RabbitMQ's StreamStats figures; with one message per chunk id as Roost numbers
    them, the first and committed chunk ids are the first and last offsets (-1: empty).
    A node that does not lead answers from its copy, as far as it knows it committed."""
    return _stats(_any_stream(client, stream))


def _stats(queue: Any) -> dict[str, int]:
    if isinstance(queue, StreamQueue):
        first, end = queue.log.first_offset, queue.log.next_offset
    else:
        first, end = queue.committed_range()
    empty = end <= first
    return {
        "first_chunk_id": -1 if empty else first,
        "committed_chunk_id": -1 if empty else end - 1,
    }


def resolve_stream_offset(client: Client, stream: str, kind: str, value: int | None) -> int:
    """The first offset a consumer starting at ``kind`` ("first", "last", "next",
    "offset", "timestamp") and ``value`` would read: ResolveOffsetSpec's answer (on a
    node that does not lead, from its copy's committed records)."""
    start: int = _any_stream(client, stream).start_offset(kind, value, "")
    return start


def ask_stream_leader(
    client: Client, stream: str, question: dict[str, Any], answered: Callable[[Any], None]
) -> bool:
    """On a cluster node with no copy of a replicated stream (RabbitMQ answers these
    on any node): its leader answers ``question`` (``answer_stream_question``) over the
    node link; ``answered`` gets the answer later, never before this returns
    (``{"value": …}``, ``{"code": "not_found"}``, or None: the leader out of reach).
    False: the calls above answer here (a stream here, or a member's copy), an error
    (no such stream, no right to read it) too."""
    try:
        ask = getattr(_any_stream(client, stream), "ask_leader", None)
    except BrokerError:
        return False
    return ask is not None and bool(ask(question, answered))


def answer_stream_question(queue: Any, question: dict[str, Any]) -> Any:
    """What ``stream_offset``, ``stream_sequence``, ``stream_stats`` or
    ``resolve_stream_offset`` answer for ``queue`` (a stream here, or a member's
    stand-in, which answers from its copy), asked as ``{"what": …}`` with their
    arguments."""
    what = question.get("what")
    if what == "offset":
        return queue.stored_offset(str(question.get("reference", "")))
    if what == "sequence":
        return queue.last_publishing_id(str(question.get("reference", "")))
    if what == "stats":
        return _stats(queue)
    if what == "resolve":
        value = question.get("value")
        kind = str(question.get("kind", "next"))
        return queue.start_offset(kind, value if isinstance(value, int) else None, "")
    raise PreconditionFailed(f"no such question about a stream: {what!r}")


def is_stream(client: Client, name: str) -> bool:
    """Whether ``name`` is a live stream of the client's vhost (no rights needed: the
    stream protocol's Metadata answers it for any stream, as RabbitMQ does); on a
    cluster also a replicated stream led on another node (its stand-in here forwards
    publishes to the leader and reads through it)."""
    queue = client.vhost.queues.get(name)
    if isinstance(queue, StreamQueue):
        return not queue.deleted
    return queue is not None and queue.kind == "stream" and not queue.deleted


# a node's advertised stream-protocol address
Address = tuple[str, int]


def stream_hosts(
    client: Client, name: str, addresses: Callable[[], dict[str, Address]] | None
) -> tuple[Address | None, list[Address]] | None:
    """Where the stream protocol's Metadata sends a client for ``name`` on a cluster:
    (the leader's node's address, the in-sync replicas' addresses), from the stream's
    group (``queue.group``: leader, online()) and the running nodes' advertised addresses
    (``addresses``); the leader is None while its node is down (a failover is under
    way). None: not a replicated stream, this node serves it alone."""
    queue = client.vhost.queues.get(name)
    group = getattr(queue, "group", None)
    if addresses is None or group is None:
        return None
    known = addresses()
    leader = group.leader
    replicas = [known[m] for m in group.online() if m != leader and m in known]
    return known.get(leader), replicas


def _super_stream(client: Client, name: str) -> Exchange:
    if client.access is not None:
        client.access.check("read", "exchange", name)
    exchange = client.vhost.exchanges.get(name)
    if exchange is None or exchange.deleted:
        raise NotFound(f"no exchange '{name}' in vhost '{client.vhost.name}'")
    return exchange


def super_stream_partitions(client: Client, name: str) -> list[str]:
    """The streams bound to the super stream's exchange, in their partition order."""
    found: dict[str, int] = {}
    for binding in _super_stream(client, name).bindings.values():
        destination = binding.destination
        if isinstance(destination, StreamQueue):
            order = binding.arguments.get(PARTITION_ORDER, len(found))
            found.setdefault(destination.name, order if isinstance(order, int) else 0)
    return sorted(found, key=lambda stream: (found[stream], stream))


def super_stream_route(client: Client, name: str, routing_key: str) -> list[str]:
    """The streams whose binding key equals ``routing_key`` (RabbitMQ's Route on a
    super stream's direct exchange), in partition order."""
    exchange = _super_stream(client, name)
    keyed = {
        b.destination.name
        for b in exchange.bindings.values()
        if b.routing_key == routing_key and isinstance(b.destination, StreamQueue)
    }
    return [s for s in super_stream_partitions(client, name) if s in keyed]
