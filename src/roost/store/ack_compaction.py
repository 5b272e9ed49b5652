"""A queue store's ack log compacted: what it says, rebuilt from the segments' bitmaps
(seq_index.py), as few entries as the acked runs allow (ack_log.py has the entries).
"""

from __future__ import annotations

from collections.abc import Iterator

from roost.store.ack_log import ACK_DELIVERED, ACK_FLOOR, ACK_RANGE, ack_entry
from roost.store.seq_index import Segment


def compacted_acks(segs: list[Segment], next_seq: int, delivered: bool) -> bytes:
    """The ack log rewritten from the bitmaps of ``segs`` (in order, each with a live
    record): a floor, each run of acked sequence numbers (one entry, or a range start
    and its end) and, when ``delivered``, each delivered mark."""
    floor = segs[0].first_live() if segs else next_seq
    parts = [ack_entry(floor | ACK_FLOOR)]
    for start, stop in acked_runs(segs, next_seq):
        if stop - 1 > start:
            parts.append(ack_entry(start | ACK_RANGE))
        parts.append(ack_entry(stop - 1))
    if delivered:
        for seg in segs:
            parts.extend(ack_entry(seq | ACK_DELIVERED) for seq in seg.delivered())
    return b"".join(parts)


def acked_runs(segs: list[Segment], next_seq: int) -> Iterator[tuple[int, int]]:
    """[start, stop) of each run of acked numbers from the first live one (the
    floor) to the last one given out, merged across segments and the numbers
    between them (their files are gone)."""
    at = segs[0].first_live() if segs else next_seq
    pending: tuple[int, int] | None = None
    runs: list[Iterator[tuple[int, int]]] = []
    for seg in segs:
        runs.append(iter([(at, seg.first)]))
        runs.append(seg.gone_runs())
        at = seg.first + seg.slots
    runs.append(iter([(at, next_seq)]))
    floor = segs[0].first_live() if segs else next_seq
    for source in runs:
        for start, stop in source:
            start = max(start, floor)
            if stop <= start:
                continue
            if pending is not None and pending[1] == start:
                pending = (pending[0], stop)
                continue
            if pending is not None:
                yield pending
            pending = (start, stop)
    if pending is not None:
        yield pending
