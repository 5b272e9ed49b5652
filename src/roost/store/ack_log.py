"""A queue store's ack log: 12-byte entries ``[u64 seq|flags][u32 crc32]``.

An entry is an ack of a sequence number, a *delivered* mark (bit 63), a *floor* (bit
62: every number below it is acked) or the start of a *range* (both bits: every number
from it to the ack entry that follows is acked). Read back at recovery into sorted
arrays (8 bytes an entry, looked up by bisection), so recovery's memory follows the
log's size, not the backlog's.
"""

from __future__ import annotations

import bisect
import logging
import struct
import zlib
from array import array
from pathlib import Path

log = logging.getLogger("roost.store")

ACK_FILE = "acks"
ACK = struct.Struct(">QI")
ACK_DELIVERED = 1 << 63
ACK_FLOOR = 1 << 62
ACK_RANGE = ACK_DELIVERED | ACK_FLOOR  # every seq from this one to the next entry's is acked
SEQ_MASK = (1 << 62) - 1


def ack_entry(value: int) -> bytes:
    raw = value.to_bytes(8, "big")
    return raw + zlib.crc32(raw).to_bytes(4, "big")


class AckLog:
    """What an ack log says, read from ``path`` (damage dropped with one warning each)."""

    def __init__(self) -> None:
        self.floor = 0
        self.top = 0  # the highest number the log names
        self.entries = 0  # numbers it accounts for (acks, and each range's numbers)
        self.acked = array("Q")
        self.delivered = array("Q")
        self._starts: list[int] = []
        self._ends: list[int] = []

    @classmethod
    def read(cls, path: Path, label: str) -> AckLog:
        found = cls()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return found
        size = len(data) - len(data) % ACK.size
        if size != len(data):
            log.warning("store %s: acks torn tail of %d bytes dropped", label, len(data) - size)
        bad = 0
        start = 0  # a range's start, waiting for the ack entry that ends it
        ranges: list[tuple[int, int]] = []
        for value, crc in ACK.iter_unpack(memoryview(data)[:size]):
            if zlib.crc32(value.to_bytes(8, "big")) != crc:
                bad += 1
                start = 0
                continue
            seq = value & SEQ_MASK
            if value & ACK_RANGE == ACK_RANGE:
                start = seq
                continue
            if value & ACK_FLOOR:
                found.floor = max(found.floor, seq)
            elif value & ACK_DELIVERED:
                found.delivered.append(seq)
            elif start and start < seq:
                ranges.append((start, seq))
                found.entries += seq - start + 1
            else:
                found.acked.append(seq)
                found.entries += 1
            start = 0  # a start not followed at once by its end is damage: ignored
            found.top = max(found.top, seq)
        del data
        if bad:
            log.warning("store %s: %d ack entries with bad checksums dropped", label, bad)
        found.acked = array("Q", sorted(set(found.acked)))
        found.delivered = array("Q", sorted(set(found.delivered)))
        ranges.sort()
        found._starts = [a for a, _ in ranges]
        found._ends = [b for _, b in ranges]
        return found

    def is_acked(self, seq: int) -> bool:
        if seq < self.floor:
            return True
        if seq > self.top:  # past everything the log names (a backlog behind its acks)
            return False
        acked = self.acked
        i = bisect.bisect_left(acked, seq)
        if i < len(acked) and acked[i] == seq:
            return True
        at = bisect.bisect_right(self._starts, seq) - 1
        return at >= 0 and seq <= self._ends[at]

    def was_delivered(self, seq: int) -> bool:
        delivered = self.delivered
        if not delivered or seq > delivered[-1]:
            return False
        i = bisect.bisect_left(delivered, seq)
        return i < len(delivered) and delivered[i] == seq
