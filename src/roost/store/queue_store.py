"""One durable queue's messages: segment files, live bits per segment and an ack log.

Files in the queue's directory::

    00000001.seg …   records framed by segment.py, payloads from codec.py (each carries
                     its sequence number, so the segments are also the enqueue log)
    acks             the ack log (ack_log.py): acks, delivered marks, a floor, ranges
    owner.json       whose directory this is (kind, vhost, name): the directory's own
                     name is a hash, and a directory nothing claims at start is moved
                     to lost+found with this in the warning

Messages are appended in sequence order, so a segment holds one run of sequence numbers
and what memory keeps per message is two bits (gone, delivered) in its segment's
bitmaps (seq_index.py), not a location: a queue's backlog is read back in order through
a cursor (the next record's offset follows from the last one's length), with a shared
read-ahead buffer, and a read out of order walks from the nearest mark. A segment file
is deleted when its last live record goes; when the ack log passes
``ack_compact_bytes`` (or twice its last compacted size, or a sixteenth of that once the
queue is empty) it is rewritten from the bitmaps (temp file, fsync, rename).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.store.ack_compaction import compacted_acks
from roost.store.ack_log import ACK, ACK_DELIVERED, ACK_FILE, ack_entry
from roost.store.atomic_file import install, temp_path, write_new
from roost.store.codec import MIN_PAYLOAD, decode_message, encode_message, peek_seq
from roost.store.files import write_all
from roost.store.queue_recovery import Recovery
from roost.store.segment import HEADER, HEADER_SIZE, ScanResult, frame, read_record, scan
from roost.store.seq_index import Segment

if TYPE_CHECKING:
    from roost.store.hub import DiskStore
    from roost.store.member_log import MemberLog

__all__ = ["ACK", "ACK_FILE", "OWNER_FILE", "QueueStore", "Recovered"]

log = logging.getLogger("roost.store")

OWNER_FILE = "owner.json"
READ_AHEAD = 65536  # bytes a read from disk fetches: the next few dozen records in order
_PEEK = HEADER_SIZE + 8  # a record's header and its sequence number


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
        self._segs: list[Segment] = []  # in order; each has a live record
        self._firsts: list[int] = []  # their first sequence numbers, for bisection
        self._tail: Segment | None = None  # the segment being appended to
        self._next_seq = 1
        self._seg = 0  # number of the segment being appended to (0: none yet)
        self._seg_fill = 0
        self._out: dict[int, bytearray] = {}  # segment -> records not yet written
        self._out_at: dict[int, int] = {}  # segment -> file offset of that buffer
        self._paths: dict[int, Path] = {}  # segment -> its file's path
        # where the record after the last one read is: (segment, its seq, its offset)
        self._cursor: tuple[Segment | None, int, int] = (None, 0, 0)
        # bytes read ahead from one segment file (hub.read_ahead bounds how many stores
        # keep theirs): (segment number, file offset, bytes)
        self.ahead: tuple[int, int, bytes] = (0, 0, b"")
        self._acks = bytearray()
        self._ack_size = 0
        self._compacted = 0  # the ack log's size right after its last rewrite
        self._delivered = 0  # live records with a delivered mark
        self.bytes_on_disk = 0
        self.count = 0
        self.deleted = False
        self.dir_made = False
        self.member: MemberLog | None = None  # a quorum member's copy: its record

    # -- paths ------------------------------------------------------------------------

    def _seg_path(self, n: int) -> Path:
        # one Path per segment: a read looks its descriptor up by it
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
        tail = self._tail
        if tail is None or (
            self._seg_fill + len(record) > self.hub.segment_size and self._seg_fill
        ):
            tail = self._roll(seq)
        seg = self._seg
        buf = self._out.get(seg)
        if buf is None:
            buf = self._out[seg] = bytearray()
            self._out_at[seg] = self._seg_fill
        offset = self._seg_fill
        buf += record
        self._seg_fill += len(record)
        tail.add(seq, offset, True)
        self.count += 1
        self.hub.dirty(self)
        return seq

    def _roll(self, seq: int) -> Segment:
        self._seg = max(self._seg, self._segs[-1].number if self._segs else 0) + 1
        self._seg_fill = 0
        tail = self._tail = Segment(self._seg, seq)
        self._segs.append(tail)
        self._firsts.append(seq)
        self.hub.new_segment(self)
        return tail

    def _find(self, seq: int) -> Segment | None:
        """The segment whose slots hold ``seq`` (the head's, most often)."""
        segs = self._segs
        if segs and segs[0].covers(seq):
            return segs[0]
        i = bisect_right(self._firsts, seq) - 1
        if i >= 0 and segs[i].covers(seq):
            return segs[i]
        return None

    def remove(self, seq: int) -> None:
        """The message left the queue (acked, dropped, purged)."""
        seg = self._find(seq)
        if seg is None or not seg.is_live(seq):
            return
        if seg.drop(seq):
            self._delivered -= 1
        self.count -= 1
        self._acks += ack_entry(seq)
        if not seg.live:
            self._drop_segment(seg)
        self.hub.dirty(self)

    def mark_delivered(self, seq: int) -> None:
        seg = self._find(seq)
        if seg is None or not seg.is_live(seq) or seg.was_delivered(seq):
            return
        seg.deliver(seq)
        self._delivered += 1
        self._acks += ack_entry(seq | ACK_DELIVERED)
        self.hub.dirty(self)

    def _drop_segment(self, seg: Segment) -> None:
        """Its last live record went: forget it and delete its file (the one being
        appended to as well: the next append then starts a new file)."""
        i = self._segs.index(seg)
        del self._segs[i], self._firsts[i]
        if seg is self._tail:
            self._tail = None
        n = seg.number
        path = self._seg_path(n)
        del self._paths[n]
        self._out.pop(n, None)
        self._out_at.pop(n, None)
        if self.ahead[0] == n:
            self.ahead = (0, 0, b"")
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
        member = self.member
        if not self._out and not self._acks and (member is None or not member.pending):
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
        if member is not None:
            member.write(written)  # after the records it names, in the same commit

    def compact_acks(self) -> None:
        """Rewrite the ack log from the bitmaps: a floor, each run of acked sequence
        numbers (one entry, or a range start and its end) and each delivered mark. Runs
        of live or acked slots are found a byte at a time in C (seq_index.next_bit), so
        neither a long backlog behind the head nor one message held unacked at the head
        of a busy queue makes this (or the file) large."""
        data = compacted_acks(self._segs, self._next_seq, bool(self._delivered))
        path = self.dir / ACK_FILE
        tmp = temp_path(path)
        try:
            write_new(tmp, data)
        except OSError as exc:  # a full disk: the appended log stands, compact later
            log.warning("store %s: ack log not compacted: %s", self.label, exc)
            return
        self.hub.files.close(path)
        install(tmp, path)
        self.hub.bytes_changed(len(data) - self._ack_size)
        self.bytes_on_disk += len(data) - self._ack_size
        self._ack_size = self._compacted = len(data)

    # -- reading ----------------------------------------------------------------------

    def read(self, seq: int) -> Recovered:
        """A stored message back from its record (buffered or on disk)."""
        seg = self._find(seq)
        if seg is None or not seg.is_live(seq):
            raise KeyError(seq)
        at_seg, at_seq, offset = self._cursor
        if at_seg is not seg or at_seq != seq:
            # the records between are gone or were read already: walk over them from the
            # cursor, a mark or the record after damage, whichever is closest
            offset = self._walk(seg, seq, seg.start(seq, at_seq if at_seg is seg else 0, offset))
        head = self._bytes(seg.number, offset, _PEEK)
        length = HEADER.unpack_from(head)[0]
        data = self._bytes(seg.number, offset, HEADER_SIZE + length)
        self._cursor = (seg, seq + 1, offset + HEADER_SIZE + length)
        return decode_message(read_record(data, offset))

    def _walk(self, seg: Segment, seq: int, offset: int) -> int:
        """The offset of ``seq``'s record, header by header from the one at ``offset``;
        by a scan of the whole segment if that walk loses its way (damage that cost no
        sequence number, so no jump was recorded around it)."""
        while True:
            head = self._bytes(seg.number, offset, _PEEK)
            if len(head) < _PEEK:
                break
            length, _crc = HEADER.unpack_from(head)
            found = peek_seq(head[HEADER_SIZE:])
            if found == seq:
                return offset
            if found > seq or length < MIN_PAYLOAD:
                break
            offset += HEADER_SIZE + length
        data = self._whole(seg.number)
        for at, payload in scan(data, ScanResult(), min_length=MIN_PAYLOAD):
            if peek_seq(payload) == seq:
                return at
        raise KeyError(seq)

    def _bytes(self, n: int, offset: int, size: int) -> bytes:
        """``size`` bytes of segment ``n`` from ``offset`` (fewer at its end): from the
        write buffer, the read-ahead, or a ``pread`` that refills the read-ahead."""
        buf = self._out.get(n)
        start = self._out_at.get(n, 0)
        if buf is not None and offset >= start:
            return bytes(buf[offset - start : offset - start + size])
        ahead_n, ahead_at, ahead = self.ahead
        if ahead_n == n and ahead_at <= offset and offset + size <= ahead_at + len(ahead):
            return ahead[offset - ahead_at : offset - ahead_at + size]
        fd = self.hub.files.fd(self._seg_path(n))
        data = os.pread(fd, max(size, READ_AHEAD), offset)
        if buf is not None:  # the file ends where the buffer begins
            data = data[: start - offset]
            if offset + size > start:
                data += bytes(buf[: offset + size - start])
                return data
        self.ahead = (n, offset, data)
        self.hub.read_ahead(self)
        return data[:size]

    def _whole(self, n: int) -> bytes:
        """Segment ``n`` whole: its file, then what is still buffered for it."""
        fd = self.hub.files.fd(self._seg_path(n))
        buf = self._out.get(n)
        size = self._out_at[n] if buf is not None else os.fstat(fd).st_size
        return os.pread(fd, size, 0) + (bytes(buf) if buf is not None else b"")

    def drop_ahead(self) -> None:
        self.ahead = (0, 0, b"")

    # -- recovery ---------------------------------------------------------------------

    def recover(self, keep: Callable[[int, int, bool, int], None]) -> int:
        """Rebuild the bitmaps from the files; ``keep(seq, body size, delivered, expiry
        ms or 0)`` for each live message in order (bodies stay on disk: ``read`` fetches
        one). Damage is dropped with one warning line per problem, never raised."""
        return Recovery(self, keep).run()

    # -- end --------------------------------------------------------------------------

    def purge(self, seqs: list[int]) -> None:
        for seq in seqs:
            self.remove(seq)

    def destroy(self) -> None:
        """The queue was deleted: forget everything and remove its directory. Once only:
        the directory may be another store's by a second call (a quorum member's copy,
        opened there when the queue's leader here was deposed)."""
        if self.deleted:
            return
        self.deleted = True
        for seg in self._segs:
            self.hub.files.close(self._seg_path(seg.number))
            self.hub.segment_count -= 1
        self._segs.clear()
        self._firsts.clear()
        self._tail = None
        self.ahead = (0, 0, b"")
        self.hub.not_reading(self)
        self.hub.files.close(self.dir / ACK_FILE)
        self._out.clear()
        self._acks.clear()
        self.hub.bytes_changed(-self.bytes_on_disk)
        self.bytes_on_disk = 0
        shutil.rmtree(self.dir, ignore_errors=True)
