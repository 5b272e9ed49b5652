"""A queue store rebuilt from its files at start-up (``QueueStore.recover``).

Nothing is kept per message meanwhile: the ack log is read into sorted arrays (its size,
not the backlog's), each segment file is read and scanned once, one at a time, and each
live record becomes two bits in its segment's bitmaps and one ``keep`` call. A 10 M
backlog's restart used to build three parallel arrays of 20 bytes a message first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from roost.store.ack_log import ACK_FILE, SEQ_MASK, AckLog
from roost.store.codec import (
    FLAG_TRANSIENT,
    MIN_PAYLOAD,
    CodecError,
    decode_message,
    peek_expires,
    peek_seq,
)
from roost.store.segment import HEADER_SIZE, ScanResult, scan
from roost.store.seq_index import Segment

if TYPE_CHECKING:
    from pathlib import Path

    from roost.store.queue_store import QueueStore

log = logging.getLogger("roost.store")

MAX_GAP = 1 << 32  # sequence numbers further apart than this in one queue are damage
MIN_RECORD = HEADER_SIZE + MIN_PAYLOAD


class Recovery:
    def __init__(self, store: QueueStore, keep: Callable[[int, int, bool, int], None]) -> None:
        self.store = store
        self.keep = keep
        self.acks = AckLog.read(store.dir / ACK_FILE, store.label)
        self.floor = self.acks.floor
        self.numbers = sorted(
            int(p.name[:-4]) for p in store.dir.glob("*.seg") if p.name[:-4].isdigit()
        )
        # Every number skipped between two records must be accounted for by an ack or
        # a record on disk: a record behind a gap that nothing explains is damage (a
        # checksum that passed on garbage could otherwise ask for bitmaps of billions of
        # slots). Records are counted from the files' sizes, before they are read.
        self.budget = self.acks.entries + sum(
            store._seg_path(n).stat().st_size // MIN_RECORD for n in self.numbers
        )
        # the last record's seq: the next must come after it (numbers below the floor
        # are acked: their records are skipped)
        self.last = max(self.floor - 1, 0)
        self.kept = 0

    def run(self) -> int:
        store = self.store
        if not store.dir.is_dir():
            return 0
        store.dir_made = True
        next_seq = max(self.floor, self.acks.top + 1, 1)
        store._next_seq = next_seq
        for n in self.numbers:
            self._segment(n)
        next_seq = max(next_seq, self.last + 1)
        if next_seq > SEQ_MASK >> 1 or next_seq > self.last + 1 + self.budget:
            # only damage gets here (an ack entry nothing explains): go on after the last
            next_seq = self.last + 1
        store._next_seq = next_seq
        store._seg = max(self.numbers, default=0)
        store._seg_fill = store.hub.segment_size  # never append to a recovered segment
        store.count = self.kept
        ack_path = store.dir / ACK_FILE
        store._ack_size = ack_path.stat().st_size if ack_path.exists() else 0
        store.bytes_on_disk += store._ack_size
        store.hub.bytes_changed(store.bytes_on_disk)
        if store._ack_size:
            store.compact_acks()  # also cuts a torn ack tail
        return self.kept

    def _plausible(self, payload: memoryview) -> bool:
        """A record found by resynchronising after damage must carry a number that can
        follow the last good one (a segment's records are in sequence order)."""
        return len(payload) >= 8 and self.last < peek_seq(payload) <= self.last + MAX_GAP

    def _segment(self, n: int) -> None:
        """Scan segment ``n``: its live records into a ``Segment`` (or the file goes)."""
        store = self.store
        path = store._seg_path(n)
        try:
            data = path.read_bytes()
        except OSError as exc:
            log.warning("store %s: cannot read %s: %s", store.label, path.name, exc)
            return
        seg: Segment | None = None
        result = ScanResult()
        for offset, payload in scan(
            data, result, min_length=MIN_PAYLOAD, plausible=self._plausible
        ):
            seq = peek_seq(payload)
            if seq < self.floor or not self._in_order(seq):
                continue
            live = not (self.acks.is_acked(seq) or _transient(payload))
            size = 0
            if live:
                try:
                    size = len(decode_message(payload)[5])
                except CodecError as exc:
                    log.warning(
                        "store %s: %s@%d undecodable (%s), dropped",
                        store.label,
                        path.name,
                        offset,
                        exc,
                    )
                    live = False
            if seg is None:
                seg = Segment(n, seq)
                store._segs.append(seg)
                store._firsts.append(seq)
            seg.add(seq, offset, live)
            if live:
                self._kept(seg, seq, size, peek_expires(payload))
        _report(store.label, path, result)
        if seg is not None and seg.live:
            store.bytes_on_disk += len(data)
            store.hub.segment_count += 1
            return
        if seg is not None:
            del store._segs[-1], store._firsts[-1]
        if store.ahead[0] == n:
            store.drop_ahead()
        path.unlink()
        store._paths.pop(n, None)

    def _in_order(self, seq: int) -> bool:
        """Whether the record of ``seq`` can follow the last one; a warning if not."""
        gap = seq - self.last - 1
        if seq <= self.last:
            why = "out of order"
        elif seq > SEQ_MASK:
            why = "impossible number"
        elif gap > self.budget:
            why = f"{gap} numbers before it are accounted for by nothing on disk"
        else:
            self.budget -= gap
            self.last = seq
            return True
        log.warning("store %s: record with seq %d dropped: %s", self.store.label, seq, why)
        return False

    def _kept(self, seg: Segment, seq: int, size: int, expires: int) -> None:
        store = self.store
        delivered = self.acks.was_delivered(seq)
        if delivered:
            seg.deliver(seq)
            store._delivered += 1
        self.kept += 1
        store.count = self.kept
        store._next_seq = max(store._next_seq, seq + 1)  # keep() may read it back
        self.keep(seq, size, delivered, expires)


def _report(label: str, path: Path, result: ScanResult) -> None:
    for offset, length in result.dropped:
        log.warning(
            "store %s: %s@%d bad checksum or header, %d bytes dropped (scan resumed"
            " at the next intact record)",
            label,
            path.name,
            offset,
            length,
        )
    if result.torn_tail:
        log.warning(
            "store %s: %s torn tail of %d bytes dropped", label, path.name, result.torn_tail
        )


def _transient(payload: bytes | memoryview) -> bool:
    """A record paged out under memory pressure (its flags byte follows the u64 seq)."""
    return len(payload) > 8 and bool(payload[8] & FLAG_TRANSIENT)
