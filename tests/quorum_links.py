"""The node links a quorum replicator or follower sends on, for sans-IO tests: each wire
keeps what was sent on it, so a test can read the frames a member would have got."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r


class Wire:
    up = True
    writable = True

    def __init__(self, peer: str = "leader") -> None:
        self.peer = peer
        self.sent: list[Any] = []

    def send(self, frame: Any) -> bool:
        self.sent.append(frame)
        return True


class Links:
    """A wire to each of ``members``; to any member asked for when none are named."""

    def __init__(self, members: Iterable[str] | None = None) -> None:
        self.open_to_all = members is None
        self.wires = {m: Wire(m) for m in members or ()}

    def link(self, member: str) -> Wire | None:
        if self.open_to_all and member not in self.wires:
            self.wires[member] = Wire(member)
        return self.wires.get(member)


def enq(seq: int) -> bytes:
    return r.enq(seq, False, "", "q", b"\x00\x00", f"m{seq}".encode())


def batch(term: int, first: int, *entries: bytes) -> f.Replicate:
    return f.Replicate("/", "q", term, first, 0, list(entries))
