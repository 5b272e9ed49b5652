"""A replicated queue's log records, as the bytes a ``Replicate`` frame carries.

Each record names a message by its **seq**, the leader's entry number for it:

- ``ENQ`` a message joined the queue (with ``delivered``: how many times it was handed
  out before, up to 255, as in a new leader's snapshot);
- ``DLV`` it was handed out, and how many times in all (so a redelivery after failover
  carries its true ``x-delivery-count`` and is marked redelivered);
- ``DEL`` it left for good (acked, dropped, dead-lettered);
- ``RESET`` the follower drops what it holds: a snapshot of every live message follows,
  and ``upto`` is the leader's log index the snapshot stands for; after it, ``top``: the
  highest number the leader has given a message (one acked since too), so a member
  promoted later numbers new messages above it (``manager._swap``), never reusing a
  number a client's ack or a member's copy may still name; then ``numbering``: the
  leader's run of numbers (``QuorumQueue.numbering``), which a member promoted later
  keeps, as it keeps the numbers;
- ``TERM`` a new leader's first record, naming nothing: the new term's first snapshot
  stands for it, so its commit is the term's first (a promoted member's copy joins the
  queue only then, ``Replicator.inherit``);
- ``SNAP`` (first in a frame) the snapshot for ``upto`` goes on, after the number of
  messages it names (a chunk lost in between is seen); ``MORE`` (last in a frame) it
  goes on in the next frame (``catchup.py``).

A record that can open a frame (ENQ, DLV, DEL, RESET, SNAP) must not share its byte with
a replicated stream's first record (``stream_leader``'s ``SYNC``, ``OFS``): a node's
``StreamGroups`` takes such a frame of a queue it does not know for a stream's first batch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

ENQ, DLV, DEL, RESET, SNAP, MORE, TERM = b"E", b"V", b"D", b"R", b"C", b"M", b"T"
_HEAD = struct.Struct("!cQ")  # kind, seq (RESET: upto)
_ENQ = struct.Struct("!BBBI")  # delivered, exchange len, routing key len, properties len
_COUNT = struct.Struct("!I")  # a DLV's delivery count
_TOP = struct.Struct("!Q")  # a RESET's highest message number given
_RUN = struct.Struct("!QQ")  # a RESET's top and the leader's numbering


@dataclass(slots=True)
class Enq:
    seq: int
    delivered: int  # times handed out before
    exchange: str
    routing_key: str
    properties: bytes
    body: bytes


def enq(
    seq: int, delivered: int, exchange: str, routing_key: str, props: bytes, body: bytes
) -> bytes:
    ex, rk = exchange.encode(), routing_key.encode()
    return b"".join(
        (
            _HEAD.pack(ENQ, seq),
            _ENQ.pack(min(delivered, 255), len(ex), len(rk), len(props)),
            ex,
            rk,
            props,
            body,
        )
    )


def mark(kind: bytes, seq: int) -> bytes:
    return _HEAD.pack(kind, seq)


def reset(upto: int, top: int, numbering: int) -> bytes:
    return _HEAD.pack(RESET, upto) + _RUN.pack(top, numbering)


def top_of(raw: bytes) -> int:
    """A RESET record's ``top`` (0 when it names none)."""
    return _TOP.unpack_from(raw, _HEAD.size)[0] if len(raw) >= _HEAD.size + _TOP.size else 0


def numbering_of(raw: bytes) -> int:
    """A RESET record's ``numbering`` (0 when it names none)."""
    return _RUN.unpack_from(raw, _HEAD.size)[1] if len(raw) >= _HEAD.size + _RUN.size else 0


def delivered(seq: int, count: int) -> bytes:
    return _HEAD.pack(DLV, seq) + _COUNT.pack(count)


def snap(upto: int, sent: int) -> bytes:
    return _HEAD.pack(SNAP, upto) + _COUNT.pack(sent)


def count_of(raw: bytes) -> int:
    """A DLV record's delivery count; a SNAP record's messages before it."""
    return _COUNT.unpack_from(raw, _HEAD.size)[0] if len(raw) > _HEAD.size else 1


def decode(raw: bytes) -> tuple[bytes, int, Enq | None]:
    """(kind, seq or upto, the message of an ENQ)."""
    kind, seq = _HEAD.unpack_from(raw)
    if kind != ENQ:
        return kind, seq, None
    at = _HEAD.size
    delivered, exl, rkl, pl = _ENQ.unpack_from(raw, at)
    at += _ENQ.size
    ex = raw[at : at + exl].decode()
    at += exl
    rk = raw[at : at + rkl].decode()
    at += rkl
    props = raw[at : at + pl]
    return kind, seq, Enq(seq, delivered, ex, rk, props, raw[at + pl :])
