"""The store's per-segment bitmaps (store/seq_index.py) and what recovery holds in
memory: bits per message, never a per-message array."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from roost.store.hub import DiskStore
from roost.store.seq_index import Segment, next_bit

PROPS: tuple[Any, ...] = (None,) * 14


@given(st.binary(max_size=8), st.integers(0, 80), st.integers(0, 80), st.booleans())
def test_next_bit_finds_what_a_bit_by_bit_search_finds(
    raw: bytes, i: int, n: int, value: bool
) -> None:
    bits = bytearray(raw)
    expected = next(
        (j for j in range(i, n) if bool(j >> 3 < len(bits) and bits[j >> 3] >> (j & 7) & 1)
         is value),
        max(n, i) if i >= n else n,
    )
    assert next_bit(bits, i, n, value) == (n if i >= n else expected)


def test_a_segment_tracks_gone_and_delivered_slots() -> None:
    seg = Segment(1, 100)
    for seq in range(100, 140):
        seg.add(seq, (seq - 100) * 50, True)
    seg.add(145, 2000, True)  # 140..144 lost to damage: gone, and a jump around them
    assert seg.slots == 46 and seg.live == 41
    assert not seg.is_live(142) and seg.jumps == {145: 2000}
    seg.deliver(120)
    assert seg.drop(120) and not seg.drop(121)
    seg.deliver(130)
    assert list(seg.delivered()) == [130]
    assert list(seg.gone_runs()) == [(120, 122), (140, 145)]
    assert seg.first_live() == 100
    assert seg.start(143 + 2, 0, 0) == 2000  # from the jump, not across the damage


def test_recovery_keeps_bits_not_a_slot_per_message(tmp_path: Path) -> None:
    """300,000 queued records: recovery's own allocations stay near one segment's bytes
    (read one at a time) plus a few bits a message. An array of locations, sizes and
    numbers per record, as recovery kept before, would be 6 MB here."""
    hub = DiskStore(tmp_path, segment_size=1 << 20)
    store = hub.open_queue("/", "q")
    for i in range(300_000):
        store.append("", "q", PROPS, b"%08d" % i)
        if i % 10_000 == 0:
            hub.sync_now()
    hub.sync_now()
    again = DiskStore(tmp_path, segment_size=1 << 20).open_queue("/", "q")
    count = [0]

    def keep(_seq: int, _size: int, _delivered: bool, _expires: int) -> None:
        count[0] += 1

    tracemalloc.start()
    try:
        again.recover(keep)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count[0] == 300_000 == again.count
    assert peak < (1 << 20) + 1_000_000, f"recovery peaked at {peak:,} bytes"
    assert again.read(150_001)[5] == b"%08d" % 150_000
