"""The frames of the node-to-node link (sans-IO; the wire layout is in ``codec.py``).

One TCP connection per pair of nodes carries everything between them, both ways:

- routed messages (``Publish``: a message the receiving node routed, for its target
  queues on the peer) and their outcome (``PublishResult``: confirmed after the home
  node's fsync, nacked, returned unroutable);
- remote consumers: ``Consume`` / ``ConsumeOk`` / ``Cancel``, then ``Deliver`` one way
  and ``Settle`` (ack, nack, reject) and ``Credit`` (prefetch, end to end) the other;
  ``Get`` / ``GetResult`` for basic.get;
- ``Flow``: a queue on the sender is congested (or no longer), so the receiver holds the
  publishers that feed it, as the home node would hold its own;
- ``Applied``: the definitions revision the sender has applied (read-your-writes);
- ``Replicate`` / ``ReplicateAck``: a replicated queue's log entries, fenced by the
  leader's term (the quorum-queue issue builds on these);
- ``Fenced``: the sender cannot renew its etcd lease, or can again (cluster/quorum/fence.py);
- ``StreamAsk`` / ``StreamAnswer``: a replicated stream's figures, from its leader.

Names (vhost, queue, exchange, routing key, consumer tag) are AMQP short strings, at
most 255 bytes of UTF-8; message properties travel as the AMQP content-header bytes the
publishing node already has, opaque to the link.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field


class Kind(enum.IntEnum):
    HELLO = 1
    HEARTBEAT = 2
    PUBLISH = 3
    PUBLISH_RESULT = 4
    CONSUME = 5
    CONSUME_OK = 6
    CANCEL = 7
    DELIVER = 8
    SETTLE = 9
    CREDIT = 10
    GET = 11
    GET_RESULT = 12
    FLOW = 13
    APPLIED = 14
    REPLICATE = 15
    REPLICATE_ACK = 16
    QUEUE_OP = 40  # a remote queue's counts and purge (kept apart from 17+ for issue 22)
    QUEUE_OP_RESULT = 41
    CONFIRMED = 42  # many PublishResults CONFIRMED in one frame
    ACKED = 43  # many Settle ACKs in one frame
    BATCH = 44  # a loop turn's run of Publish / Deliver frames in one frame
    FENCED = 45  # this node's etcd lease went unrenewed too long, or was renewed again
    STREAM_ASK = 46  # a stream-protocol query about a replicated stream, to its leader
    STREAM_ANSWER = 47


class Outcome(enum.IntEnum):
    """What became of a forwarded publish on the home node."""

    CONFIRMED = 0  # enqueued (persistent ones: after the fsync)
    NACKED = 1  # the home node could not take it (queue full with reject-publish, …)
    UNROUTABLE = 2  # none of its target queues exists there any more (mandatory: return)


class QueueOpKind(enum.IntEnum):
    COUNT = 0  # its ready messages and consumers (declare-ok, passive or not)
    PURGE = 1


class SettleOp(enum.IntEnum):
    ACK = 0
    NACK = 1
    REJECT = 2


# flag bits
PUBLISH_MANDATORY = 1
PUBLISH_CONFIRM = 2  # the sender wants a PublishResult
PUBLISH_IMMEDIATE_FLUSH = 4  # a transaction's commit: fsync before the result
CONSUME_NO_ACK = 1
CONSUME_EXCLUSIVE = 2
SETTLE_MULTIPLE = 1
SETTLE_REQUEUE = 2
DELIVER_REDELIVERED = 1


@dataclass(slots=True)
class Hello:
    """First frame each way: who is speaking. ``incarnation`` changes at every start of
    the node, so the peer knows that consumers and publishes of the old one are gone."""

    node: str
    incarnation: int
    version: int = 1  # 2: reads Batch frames


LINK_VERSION = 2


@dataclass(slots=True)
class Heartbeat:
    pass


@dataclass(slots=True)
class Publish:
    publish_id: int  # the sender's id for the PublishResult (0: none wanted)
    flags: int
    vhost: str
    queues: list[str]  # the target queues homed on the receiver
    exchange: str
    routing_key: str
    properties: bytes
    body: bytes


@dataclass(slots=True)
class PublishResult:
    publish_id: int
    outcome: Outcome
    text: str = ""


@dataclass(slots=True)
class Consume:
    consumer_id: int  # chosen by the node the client is on, unique per link
    vhost: str
    queue: str
    tag: str
    prefetch: int  # initial credit; 0 = unlimited
    flags: int = 0
    arguments: bytes = b""  # JSON of the consumer arguments (x-priority, …)


@dataclass(slots=True)
class ConsumeOk:
    consumer_id: int
    # a replicated queue's run of message numbers (``QuorumQueue.numbering``; 0: none):
    # the subscriber's stand-in keeps acks by number only within one run
    numbering: int = 0


@dataclass(slots=True)
class Cancel:
    """Either way: the client's node cancels its consumer, or the home node cancels it
    (queue deleted, node shutting down) with the reason for basic.cancel."""

    consumer_id: int
    reply_code: int = 0
    text: str = ""


@dataclass(slots=True)
class Deliver:
    consumer_id: int
    delivery_id: int  # the home node's delivery tag on this consumer
    flags: int
    delivery_count: int
    exchange: str
    routing_key: str
    properties: bytes
    body: bytes


@dataclass(slots=True)
class Settle:
    consumer_id: int
    op: SettleOp
    flags: int
    delivery_id: int


@dataclass(slots=True)
class Credit:
    consumer_id: int
    credit: int  # more deliveries the client's node can take


@dataclass(slots=True)
class Get:
    request_id: int
    vhost: str
    queue: str
    no_ack: bool


@dataclass(slots=True)
class GetResult:
    """``found`` False: the queue was empty (or gone: ``reply_code`` says so)."""

    request_id: int
    found: bool
    delivery_id: int = 0
    flags: int = 0
    message_count: int = 0
    reply_code: int = 0
    exchange: str = ""
    routing_key: str = ""
    properties: bytes = b""
    body: bytes = b""


@dataclass(slots=True)
class Confirmed:
    """Publishes confirmed in one loop turn: ``ids`` packed as big-endian u64s
    (``pack_ids``), one frame where each would take a ``PublishResult``."""

    ids: bytes


@dataclass(slots=True)
class Acked:
    """Deliveries acked in one loop turn (big-endian u64 delivery ids), one frame where
    each would take a ``Settle``."""

    ids: bytes


@dataclass(slots=True)
class Batch:
    """A run of ``Publish`` and ``Deliver`` frames queued in one loop turn, in one frame:
    its payload is the inner frames, each encoded as it would be alone (size, kind,
    fields). The receiver handles them in order, as if they had come one by one; it
    decodes and dispatches one frame where it would dispatch each (``Encoder``)."""

    frames: list[Publish | Deliver]


BATCHED = (Publish, Deliver)  # the kinds a Batch carries


def pack_ids(ids: list[int]) -> bytes:
    return struct.pack(f"!{len(ids)}Q", *ids)


def unpack_ids(raw: bytes) -> tuple[int, ...]:
    if len(raw) % 8:
        raise ValueError("packed ids are 8 bytes each")
    return struct.unpack(f"!{len(raw) // 8}Q", raw)


@dataclass(slots=True)
class QueueOp:
    """Asked of a queue's home node by a node whose client named the queue."""

    request_id: int
    op: QueueOpKind
    vhost: str
    queue: str


@dataclass(slots=True)
class QueueOpResult:
    """``messages``: ready messages after the op (COUNT) or purged (PURGE);
    ``reply_code`` 404 when the queue is not there."""

    request_id: int
    reply_code: int
    messages: int
    consumers: int
    text: str = ""


@dataclass(slots=True)
class Flow:
    vhost: str
    queue: str
    congested: bool


@dataclass(slots=True)
class Applied:
    revision: int


@dataclass(slots=True)
class Replicate:
    """A leader's log entries for one replicated queue, fenced by its election term:
    a follower refuses entries of a term older than the newest it has seen."""

    vhost: str
    queue: str
    term: int
    first_index: int
    commit_index: int
    entries: list[bytes] = field(default_factory=list)


@dataclass(slots=True)
class ReplicateAck:
    vhost: str
    queue: str
    term: int
    durable_index: int  # the follower holds every entry up to here on disk
    ok: bool = True  # False: refused (older term, or a gap: resend from durable_index+1)


@dataclass(slots=True)
class Fenced:
    """The sender cannot renew its etcd lease (``True``; cluster/lease.py's fence) or
    can again (``False``): a fenced quorum leader whose majority is fenced too (etcd out
    of reach for all of them: none can elect another) keeps serving."""

    fenced: bool


@dataclass(slots=True)
class StreamAsk:
    """Asked of a replicated stream's leader by a node with no copy of it (the stream
    protocol's QueryOffset, QueryPublisherSequence, StreamStats, ResolveOffsetSpec):
    ``question`` is JSON (``cluster/quorum/stream_asks.py``)."""

    request_id: int
    vhost: str
    stream: str
    question: bytes


@dataclass(slots=True)
class StreamAnswer:
    request_id: int
    answer: bytes  # JSON: {"value": …} or {"code": "not_found" | "not_available"}


Frame = (
    Hello
    | Heartbeat
    | Publish
    | PublishResult
    | Consume
    | ConsumeOk
    | Cancel
    | Deliver
    | Settle
    | Credit
    | Get
    | GetResult
    | Flow
    | Applied
    | Replicate
    | ReplicateAck
    | QueueOp
    | QueueOpResult
    | Confirmed
    | Acked
    | Batch
    | Fenced
    | StreamAsk
    | StreamAnswer
)
