"""One durable queue's messages: segment files, an in-memory index and an ack log.

Files in the queue's directory::

    00000001.seg …   records framed by segment.py, payloads from codec.py (each carries
                     its sequence number, so the segments are also the enqueue log)
    acks             12-byte entries ``[u64 seq|flags][u32 crc32]``: an ack, a
                     "delivered" mark, a floor (every seq below it is acked), or the
                     start of a range whose end is the ack entry that follows it
    owner.json       whose directory this is (kind, vhost, name): the directory's own
                     name is a hash, and a directory nothing claims at start is moved
                     to lost+found with this in the warning

The index is ``array('Q')`` with one slot per sequence number from ``_base``: the
record's location ``segment << 32 | offset`` (bit 63: delivered), 0 once removed.
A segment file is deleted when its last live record goes; when the ack log passes
``ack_compact_bytes`` (or twice its last compacted size, or a sixteenth of that once the
queue is empty) it is rewritten from the index (temp file, fsync, rename).
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import shutil
import struct
import zlib
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.store.codec import (
    FLAG_TRANSIENT,
    CodecError,
    decode_message,
    encode_message,
    peek_expires,
    peek_seq,
)
from roost.store.files import fsync_path, write_all
from roost.store.segment import HEADER_SIZE, ScanResult, frame, read_record, scan

if TYPE_CHECKING:
    from roost.store.hub import DiskStore

log = logging.getLogger("roost.store")

ACK = struct.Struct(">QI")
ACK_DELIVERED = 1 << 63
ACK_FLOOR = 1 << 62
ACK_RANGE = ACK_DELIVERED | ACK_FLOOR  # every seq from this one to the next entry's is acked
SEQ_MASK = (1 << 62) - 1
DELIVERED = 1 << 63
LOC_MASK = DELIVERED - 1
MAX_GAP = 1 << 32  # sequence numbers further apart than this in one queue are damage
ACK_FILE = "acks"
OWNER_FILE = "owner.json"
MIN_PAYLOAD = 15  # u64 seq, u8 flags, three u16 lengths: shorter is not a record
READ_AHEAD = 4096  # a paged-in read's first pread: a small message's whole record


def _seg_name(n: int) -> str:
    return f"{n:08d}.seg"


# A recovered message: (seq, redelivered, exchange, routing key, properties, body).
Recovered = tuple[int, bool, str, str, tuple[Any, ...], bytes]


class QueueStore:
    def __init__(
        self, hub: DiskStore, directory: Path, label: str, owner: dict[str, str] | None = None
    ) -> None:
        self.hub = hub
        self.dir = directory
        self.label = label  # "vhost/queue" for log lines
        self.owner = owner
        # called once, by the append that will make the directory (core.persistence
        # journals that the queue has data from then on)
        self.on_first_write: Callable[[], None] | None = None
        self._pos = array("Q")
        self._head = 0  # index of seq _base in _pos (front trimmed lazily)
        self._base = 1
        self._next_seq = 1
        self._live: dict[int, int] = {}  # segment -> live records
        self._seg = 0  # segment being appended to (0: none yet)
        self._seg_fill = 0
        self._out: dict[int, bytearray] = {}  # segment -> records not yet written
        self._out_at: dict[int, int] = {}  # segment -> file offset of that buffer
        self._paths: dict[int, Path] = {}  # segment -> its file's path
        self._acks = bytearray()
        self._ack_size = 0
        self._compacted = 0  # the ack log's size right after its last rewrite
        self._delivered = 0  # live slots with the delivered bit
        self.bytes_on_disk = 0
        self.count = 0
        self.deleted = False
        self.dir_made = False

    # -- paths ------------------------------------------------------------------------

    def _seg_path(self, n: int) -> Path:
        # one Path per segment: a paged-in read looks its descriptor up by it, and a new
        # Path each time cost a join and a hash per message
        path = self._paths.get(n)
        if path is None:
            path = self._paths[n] = self.dir / _seg_name(n)
        return path

    @property
    def has_files(self) -> bool:
        """The queue has a data directory, or its next write makes one. (Recovery moves
        ``_next_seq`` only where it found a directory, so otherwise an append did.)"""
        return self.dir_made or self._next_seq > 1

    # -- writing ----------------------------------------------------------------------

    def append(
        self,
        exchange: str,
        routing_key: str,
        properties: tuple[Any, ...],
        body: bytes,
        redelivered: bool = False,
        transient: bool = False,
        expires_ms: int = 0,
    ) -> int:
        """Buffer a message for the next group commit; its sequence number. A transient
        one (paged out under memory pressure) is skipped by recovery; ``expires_ms``: when
        its TTL runs out (ms since the epoch), handed back by recovery."""
        seq = self._next_seq
        self._next_seq = seq + 1
        if self.on_first_write is not None:
            announce, self.on_first_write = self.on_first_write, None
            announce()
        record = frame(
            encode_message(
                seq, exchange, routing_key, properties, body, redelivered, transient, expires_ms
            )
        )
        if self._seg == 0 or (
            self._seg_fill + len(record) > self.hub.segment_size and self._seg_fill
        ):
            self._roll()
        seg = self._seg
        buf = self._out.get(seg)
        if buf is None:
            buf = self._out[seg] = bytearray()
            self._out_at[seg] = self._seg_fill
        offset = self._seg_fill
        buf += record
        self._seg_fill += len(record)
        self._live[seg] = self._live.get(seg, 0) + 1
        self._pos.append(seg << 32 | offset)
        self.count += 1
        self.hub.dirty(self)
        return seq

    def _roll(self) -> None:
        self._seg = max(self._seg, max(self._live, default=0)) + 1
        self._seg_fill = 0
        self.hub.new_segment(self)

    def _slot(self, seq: int) -> int:
        i = seq - self._base
        if i < 0 or seq >= self._next_seq:
            return -1
        return self._head + i

    def remove(self, seq: int) -> None:
        """The message left the queue (acked, dropped, purged)."""
        i = self._slot(seq)
        if i < 0 or not self._pos[i]:
            return
        loc = self._pos[i]
        if loc & DELIVERED:
            self._delivered -= 1
            loc &= LOC_MASK
        self._pos[i] = 0
        self.count -= 1
        self._acks += _ack_entry(seq)
        seg = loc >> 32
        left = self._live[seg] - 1
        if left:
            self._live[seg] = left
        else:
            del self._live[seg]
            self._drop_segment(seg)
            if seg == self._seg:
                self._seg_fill = self.hub.segment_size  # the next append starts a new file
        self._trim_front()
        self.hub.dirty(self)

    def mark_delivered(self, seq: int) -> None:
        i = self._slot(seq)
        if i < 0 or not self._pos[i] or self._pos[i] & DELIVERED:
            return
        self._pos[i] |= DELIVERED
        self._delivered += 1
        self._acks += _ack_entry(seq | ACK_DELIVERED)
        self.hub.dirty(self)

    def _trim_front(self) -> None:
        pos = self._pos
        head = self._head
        end = len(pos)
        while head < end and not pos[head]:
            head += 1
        self._base += head - self._head
        if head > 4096 and head * 2 > end:
            del pos[:head]
            head = 0
        self._head = head
        if head == len(pos):  # empty: start the array afresh
            del pos[:]
            self._head = 0
            self._base = self._next_seq

    def _drop_segment(self, seg: int) -> None:
        path = self._seg_path(seg)
        del self._paths[seg]
        self._out.pop(seg, None)
        self._out_at.pop(seg, None)
        self.hub.files.close(path)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            size = 0
        self.bytes_on_disk -= size
        self.hub.bytes_changed(-size)
        self.hub.segment_count -= 1

    def write_pending(self, written: set[Path]) -> None:
        """Write buffered records and acks (no fsync), adding each file written to
        ``written``. An OSError (ENOSPC) propagates with every buffer that was not
        written whole still buffered, at its offset: the next call writes it again over
        whatever part reached the file, and reads keep being served from the buffer."""
        if not self._out and not self._acks:
            return
        if not self.dir_made:
            self.dir.mkdir(parents=True, exist_ok=True)
            if self.owner is not None:
                owner = self.dir / OWNER_FILE
                owner.write_text(json.dumps(self.owner), "utf-8")
                written.add(owner)
            self.dir_made = True
        files = self.hub.files
        for seg in list(self._out):
            buf = self._out[seg]
            path = self._seg_path(seg)
            write_all(files.fd(path), buf, self._out_at[seg])
            del self._out[seg], self._out_at[seg]
            self.bytes_on_disk += len(buf)
            self.hub.bytes_changed(len(buf))
            written.add(path)
        if self._acks:
            path = self.dir / ACK_FILE
            write_all(files.fd(path), self._acks, self._ack_size)
            self._ack_size += len(self._acks)
            self.bytes_on_disk += len(self._acks)
            self.hub.bytes_changed(len(self._acks))
            self._acks.clear()
            written.add(path)
            # a rewrite at most each time the log doubles, so one that compacts to a lot
            # (many holes between live messages) is not rewritten at every commit
            limit = max(self.hub.ack_compact_bytes, 2 * self._compacted)
            if self._ack_size > (limit if self.count else limit // 16):
                self.compact_acks()

    def compact_acks(self) -> None:
        """Rewrite the ack log from the index: a floor, each run of acked sequence numbers
        (one entry, or a range start and its end) and each delivered mark. Slots after the
        last hole and delivered mark are not visited, and a run of holes is skipped at C
        speed, so neither a long backlog behind the head nor one message held unacked at
        the head of a busy queue makes this (or the file) large."""
        base, head, pos = self._base, self._head, self._pos
        parts = [_ack_entry(base | ACK_FLOOR)]
        end = len(pos)
        holes = end - head - self.count
        marks = self._delivered
        i = head
        with memoryview(pos) as view, view.cast("B") as raw:
            while i < end and (holes or marks):
                loc = pos[i]
                if loc:
                    if loc & DELIVERED:
                        parts.append(_ack_entry(base + i - head | ACK_DELIVERED))
                        marks -= 1
                    i += 1
                    continue
                stop = _zero_run_end(raw, i, end)
                first, last = base + i - head, base + stop - 1 - head
                if last > first:
                    parts.append(_ack_entry(first | ACK_RANGE))
                parts.append(_ack_entry(last))
                holes -= stop - i
                i = stop
        data = b"".join(parts)
        path = self.dir / ACK_FILE
        tmp = self.dir / (ACK_FILE + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk: the appended log stands, compact later
            log.warning("store %s: ack log not compacted: %s", self.label, exc)
            tmp.unlink(missing_ok=True)
            return
        self.hub.files.close(path)
        os.replace(tmp, path)
        fsync_path(self.dir)
        self.hub.bytes_changed(len(data) - self._ack_size)
        self.bytes_on_disk += len(data) - self._ack_size
        self._ack_size = self._compacted = len(data)

    # -- reading ----------------------------------------------------------------------

    def read(self, seq: int) -> Recovered:
        """A stored message back from its record (buffered or on disk)."""
        i = self._slot(seq)
        if i < 0 or not self._pos[i]:
            raise KeyError(seq)
        loc = self._pos[i] & LOC_MASK
        seg, offset = loc >> 32, loc & 0xFFFFFFFF
        buf = self._out.get(seg)
        start = self._out_at.get(seg, 0)
        if buf is not None and offset >= start:
            data = bytes(buf[offset - start : offset - start + HEADER_SIZE])
            length = int.from_bytes(data[:4], "big")
            data = bytes(buf[offset - start : offset - start + HEADER_SIZE + length])
        else:
            fd = self.hub.files.fd(self._seg_path(seg))
            data = os.pread(fd, READ_AHEAD, offset)  # most records whole in one call
            length = int.from_bytes(data[:4], "big")
            if HEADER_SIZE + length > len(data):
                data += os.pread(fd, HEADER_SIZE + length - len(data), offset + len(data))
            else:
                data = data[: HEADER_SIZE + length]
        return decode_message(read_record(data, offset))

    # -- recovery ---------------------------------------------------------------------

    def recover(self, keep: Callable[[int, int, bool, int], None]) -> int:
        """Rebuild the index from the files; ``keep(seq, body size, delivered, expiry ms or
        0)`` for each live message in order (bodies stay on disk: ``read`` fetches one).
        Damage is dropped with one warning line per problem, never raised."""
        if not self.dir.is_dir():
            return 0
        self.dir_made = True
        acked, ranges, delivered, floor, max_ack = self._read_acks()
        next_seq = max(floor, max_ack + 1, 1)
        segs = sorted(int(p.name[:-4]) for p in self.dir.glob("*.seg") if p.name[:-4].isdigit())
        # live records as parallel arrays (no per-message objects even while recovering)
        # 12 bytes a record, 20 with a TTL: peak memory of a 10 M backlog's restart
        seqs, locs, sizes = array("Q"), array("Q"), array("I")  # a body is < 4 GiB
        expiries: array[int] | None = None  # made at the first record with a deadline
        # a record found by resynchronising after damage must carry a sequence number
        # that can follow the last good one (a segment's records are in seq order)
        last = [0]
        seen = 0  # the highest seq read from the segments so far
        scanned = 0  # records read, kept or not (see the budget below)

        def plausible(payload: memoryview) -> bool:
            return len(payload) >= 8 and last[0] < peek_seq(payload) <= last[0] + MAX_GAP

        for seg in segs:
            path = self._seg_path(seg)
            try:
                data = path.read_bytes()
            except OSError as exc:
                log.warning("store %s: cannot read %s: %s", self.label, path.name, exc)
                continue
            result = ScanResult()
            found = 0
            last[0] = max(seen, floor - 1)  # not next_seq: that counts acks too
            for offset, payload in scan(data, result, min_length=MIN_PAYLOAD, plausible=plausible):
                seq = last[0] = peek_seq(payload)
                scanned += 1
                seen = max(seen, seq)
                next_seq = max(next_seq, seq + 1)
                if seq < floor or seq in acked or ranges.covers(seq) or _transient(payload):
                    continue  # gone, or paged out before the restart: not kept
                try:
                    msg = decode_message(payload)
                except CodecError as exc:
                    log.warning(
                        "store %s: %s@%d undecodable (%s), dropped",
                        self.label,
                        path.name,
                        offset,
                        exc,
                    )
                    continue
                expires = peek_expires(payload)
                if expires and expiries is None:
                    expiries = array("q", bytes(8 * len(seqs)))
                if expiries is not None:
                    expiries.append(expires)
                seqs.append(seq)
                locs.append(seg << 32 | offset)
                sizes.append(len(msg[5]))
                del msg
                found += 1
            for offset, length in result.dropped:
                log.warning(
                    "store %s: %s@%d bad checksum or header, %d bytes dropped (scan resumed"
                    " at the next intact record)",
                    self.label,
                    path.name,
                    offset,
                    length,
                )
            if result.torn_tail:
                log.warning(
                    "store %s: %s torn tail of %d bytes dropped",
                    self.label,
                    path.name,
                    result.torn_tail,
                )
            if found:
                self._live[seg] = found
                self.bytes_on_disk += len(data)
                self.hub.segment_count += 1
            else:
                path.unlink()
                del self._paths[seg]
        live = self._plausible(seqs, locs)
        if next_seq > SEQ_MASK >> 1:  # only damage gets here: restart numbering after the live
            next_seq = seqs[live[-1]] + 1 if live else 1
        self._seg = max(segs, default=0)
        self._seg_fill = self.hub.segment_size  # never append to a recovered segment
        self._base = seqs[live[0]] if live else next_seq
        self._next_seq = next_seq  # keep() may read a record back (priority queues do)
        # The index has a slot for every number from the first live message on, so each
        # number skipped must be accounted for by an ack, an acked range or a record in the
        # segments: a record behind a gap that nothing explains is damage (a checksum that
        # passed on garbage could otherwise ask for billions of slots), and so is a next
        # number nothing explains.
        budget = len(acked) + ranges.total + scanned
        kept = 0
        for i in live:
            seq, loc, size = seqs[i], locs[i], sizes[i]
            gap = seq - self._base - len(self._pos)
            if gap > budget:
                log.warning(
                    "store %s: record with seq %d dropped: %d numbers before it are"
                    " accounted for by nothing on disk",
                    self.label,
                    seq,
                    gap,
                )
                self._live[loc >> 32] -= 1
                continue
            budget -= gap
            self._pad_to(seq)
            was = seq in delivered
            self._pos.append(loc | (DELIVERED if was else 0))
            self._delivered += was
            kept += 1
            keep(seq, size, was, expiries[i] if expiries is not None else 0)
        # acked messages after the last live one still own their slots: the next append
        # (seq next_seq) must land in slot next_seq - base
        next_seq = min(next_seq, self._base + len(self._pos) + budget)
        self._next_seq = next_seq
        self._pad_to(next_seq)
        self.count = kept
        for seg in [seg for seg, n in self._live.items() if n <= 0]:
            del self._live[seg]
            path = self._paths.pop(seg)
            self.bytes_on_disk -= path.stat().st_size
            self.hub.segment_count -= 1
            path.unlink()
        ack_path = self.dir / ACK_FILE
        self._ack_size = ack_path.stat().st_size if ack_path.exists() else 0
        self.bytes_on_disk += self._ack_size
        self.hub.bytes_changed(self.bytes_on_disk)
        if self._ack_size:
            self.compact_acks()  # also cuts a torn ack tail
        return kept

    def _pad_to(self, seq: int) -> None:
        """Empty (removed) slots up to the one for ``seq``."""
        missing = seq - self._base - len(self._pos)
        if missing > 0:
            self._pos.frombytes(bytes(8 * missing))

    def _plausible(self, seqs: array[int], locs: array[int]) -> Sequence[int]:
        """Indexes of the live records in seq order, without records whose sequence number
        cannot be real (a checksum that passed on damage, or a foreign file): zero, flag
        bits set, or far past the others. All of them in order, the usual case, is a
        ``range`` (no array of indexes as large as the backlog)."""
        n = len(seqs)
        if n == 0 or (
            seqs[0] >= 1
            and seqs[-1] <= SEQ_MASK
            and all(0 < seqs[i + 1] - seqs[i] <= MAX_GAP for i in range(n - 1))
        ):
            return range(n)
        in_order = all(seqs[i] < seqs[i + 1] for i in range(n - 1))
        order = range(n) if in_order else sorted(range(n), key=seqs.__getitem__)
        out = array("Q")
        for i in order:
            seq = seqs[i]
            if seq < 1 or seq > SEQ_MASK or (out and seq - seqs[out[-1]] > MAX_GAP):
                log.warning("store %s: record with impossible seq %d dropped", self.label, seq)
                self._live[locs[i] >> 32] -= 1
                continue
            out.append(i)
        return out

    def _read_acks(self) -> tuple[set[int], _Ranges, set[int], int, int]:
        acked: set[int] = set()
        ranges = _Ranges()
        delivered: set[int] = set()
        floor = 0
        top = 0
        path = self.dir / ACK_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return acked, ranges, delivered, floor, top
        size = len(data) - len(data) % ACK.size
        if size != len(data):
            log.warning(
                "store %s: acks torn tail of %d bytes dropped", self.label, len(data) - size
            )
        bad = 0
        start = 0  # a range's start, waiting for the ack entry that ends it
        for value, crc in ACK.iter_unpack(data[:size]):
            if zlib.crc32(value.to_bytes(8, "big")) != crc:
                bad += 1
                start = 0
                continue
            seq = value & SEQ_MASK
            if value & ACK_RANGE == ACK_RANGE:
                start = seq
                continue
            if value & ACK_FLOOR:
                floor = max(floor, seq)
            elif value & ACK_DELIVERED:
                delivered.add(seq)
            elif start and start < seq:
                ranges.add(start, seq)
            else:
                acked.add(seq)
            start = 0  # a start not followed at once by its end is damage: ignored
            top = max(top, seq)
        if bad:
            log.warning("store %s: %d ack entries with bad checksums dropped", self.label, bad)
        return acked, ranges, delivered, floor, top

    # -- end --------------------------------------------------------------------------

    def purge(self, seqs: list[int]) -> None:
        for seq in seqs:
            self.remove(seq)

    def destroy(self) -> None:
        """The queue was deleted: forget everything and remove its directory."""
        self.deleted = True
        for seg in list(self._live):
            self.hub.files.close(self._seg_path(seg))
            self.hub.segment_count -= 1
        self.hub.files.close(self.dir / ACK_FILE)
        self._out.clear()
        self._acks.clear()
        self.hub.bytes_changed(-self.bytes_on_disk)
        self.bytes_on_disk = 0
        shutil.rmtree(self.dir, ignore_errors=True)


class _Ranges:
    """Acked ranges read back from a compacted ack log (inclusive, few: one per run of
    holes between live messages at the last compaction)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, first: int, last: int) -> None:
        at = bisect.bisect_left(self.starts, first)
        self.starts.insert(at, first)
        self.ends.insert(at, last)

    @property
    def total(self) -> int:
        """How many sequence numbers the ranges hold."""
        return sum(self.ends) - sum(self.starts) + len(self.starts)

    def covers(self, seq: int) -> bool:
        if not self.starts:
            return False
        at = bisect.bisect_right(self.starts, seq) - 1
        return at >= 0 and seq <= self.ends[at]


def _zero_run_end(raw: memoryview, i: int, end: int) -> int:
    """The first slot from ``i`` (below ``end``) of the index's bytes ``raw`` that is not
    0, or ``end``: windows that double in size, each checked by one ``lstrip``."""
    step = 64
    while i < end:
        stop = min(end, i + step)
        chunk = raw[i * 8 : stop * 8].tobytes()
        zeros = len(chunk) - len(chunk.lstrip(b"\0"))
        if zeros < len(chunk):
            return i + zeros // 8
        i = stop
        step *= 2
    return end


def _ack_entry(value: int) -> bytes:
    raw = value.to_bytes(8, "big")
    return raw + zlib.crc32(raw).to_bytes(4, "big")



def _transient(payload: bytes | memoryview) -> bool:
    """A record paged out under memory pressure (its flags byte follows the u64 seq)."""
    return len(payload) > 8 and bool(payload[8] & FLAG_TRANSIENT)
