"""A replicated queue's log records, as the bytes a ``Replicate`` frame carries.

Each record names a message by its **seq**, the leader's entry number for it:

- ``ENQ`` a message joined the queue (with ``delivered``: it was handed out before, as
  in a new leader's snapshot);
- ``DLV`` it was handed out for the first time (a redelivery after failover is marked);
- ``DEL`` it left for good (acked, dropped, dead-lettered);
- ``RESET`` the follower drops what it holds: a snapshot of every live message follows,
  and ``upto`` is the leader's log index the snapshot stands for.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

ENQ, DLV, DEL, RESET = b"E", b"V", b"D", b"R"
_HEAD = struct.Struct("!cQ")  # kind, seq (RESET: upto)
_ENQ = struct.Struct("!BBBI")  # delivered, exchange len, routing key len, properties len


@dataclass(slots=True)
class Enq:
    seq: int
    delivered: bool
    exchange: str
    routing_key: str
    properties: bytes
    body: bytes


def enq(
    seq: int, delivered: bool, exchange: str, routing_key: str, props: bytes, body: bytes
) -> bytes:
    ex, rk = exchange.encode(), routing_key.encode()
    return b"".join(
        (
            _HEAD.pack(ENQ, seq),
            _ENQ.pack(delivered, len(ex), len(rk), len(props)),
            ex,
            rk,
            props,
            body,
        )
    )


def mark(kind: bytes, seq: int) -> bytes:
    return _HEAD.pack(kind, seq)


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
    return kind, seq, Enq(seq, bool(delivered), ex, rk, props, raw[at + pl :])
