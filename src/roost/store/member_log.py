"""A quorum queue member's record of its copy (``member.log`` in the queue's directory),
so a follower restarted keeps its copy and its place in elections.

The copy's messages are ordinary records of the queue's store; this log adds what only
the replication knows, appended in the same group commit as the messages it names (the
follower acknowledges nothing before that commit's fsync):

- ``E`` slot, seq: the store's record ``slot`` holds the leader's message ``seq``;
- ``D`` slot: that record left the copy;
- ``S`` the member's state (JSON: term, fence, marked, durable index, ...), after the
  records it covers.

Each record is framed with its length and CRC; reading stops at the first bad one (a
torn tail), so a state is trusted only with every record before it. Recovery checks the
copy against the store: a message the last state covers that the store lacks (its
segment lost while this log was not) makes the copy unusable, and the member restarts
as one that forgot (``Regroup.forgot``). Store records this log does not name (written
after the last state, never acknowledged) are dropped. The log is rewritten from the
live map (temp file, fsync, rename) when it grows past a few times that map.
"""

from __future__ import annotations

import json
import logging
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roost.store.atomic_file import install, temp_path, write_new
from roost.store.files import write_all

if TYPE_CHECKING:
    from roost.store.queue_store import QueueStore

log = logging.getLogger("roost.store")

MEMBER_FILE = "member.log"
_HEAD = struct.Struct("!II")  # payload length, crc32 of the payload
_ENQ = struct.Struct("!cQQ")  # E, slot, seq
_DEL = struct.Struct("!cQ")  # D, slot
COMPACT_MIN = 256 * 1024  # bytes before the log may be rewritten

# A recovered copy: (state, the leader's seq -> (slot, body size, times delivered)).
MemberCopy = tuple[dict[str, Any], dict[int, tuple[int, int, int]]]


def _frame(payload: bytes) -> bytes:
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


class MemberLog:
    """Written through its queue store's ``write_pending`` (the group commit)."""

    def __init__(self, store: QueueStore, live: dict[int, int] | None = None) -> None:
        self.store = store
        self.path = store.dir / MEMBER_FILE
        self.live: dict[int, int] = dict(live or {})  # slot -> seq
        self.state = b""  # the last state's payload
        self._out = bytearray()
        self._size = 0
        self._rewrite = True  # a fresh copy: the file starts over
        self.dropped = False

    @property
    def pending(self) -> bool:
        return bool(self._out) or self._rewrite

    def enqueued(self, slot: int, seq: int) -> None:
        self.live[slot] = seq
        self._out += _frame(_ENQ.pack(b"E", slot, seq))

    def removed(self, slot: int) -> None:
        if self.live.pop(slot, None) is not None:
            self._out += _frame(_DEL.pack(b"D", slot))

    def note(self, state: dict[str, Any]) -> None:
        """The member's state from here on, written with the records before it."""
        self.state = b"S" + json.dumps(state, sort_keys=True).encode()
        self._out += _frame(self.state)
        self.store.hub.dirty(self.store)

    def drop(self) -> None:
        """The copy is a queue now (promoted): no member record any more."""
        self.dropped = True
        self._out.clear()
        self.store.hub.files.close(self.path)
        self.path.unlink(missing_ok=True)

    def write(self, written: set[Path]) -> None:
        if self.dropped or not self.pending:
            return
        if self._rewrite or self._size > max(COMPACT_MIN, 64 * len(self.live)):
            self._compact()
            return
        write_all(self.store.hub.files.fd(self.path), self._out, self._size)
        self._size += len(self._out)
        self._out.clear()
        written.add(self.path)

    def _compact(self) -> None:
        """The live map and the last state, written whole and renamed over the log."""
        data = bytearray()
        for slot, seq in self.live.items():
            data += _frame(_ENQ.pack(b"E", slot, seq))
        if self.state:
            data += _frame(self.state)
        tmp = temp_path(self.path)
        write_new(tmp, data)
        self.store.hub.files.close(self.path)
        install(tmp, self.path)
        self._size = len(data)
        self._out.clear()
        self._rewrite = False


def read_member(path: Path) -> tuple[dict[str, Any] | None, dict[int, tuple[int, bool]]]:
    """(the last whole state, slot -> (seq, covered by that state)); (None, {}) without
    a file or a state."""
    try:
        data = path.read_bytes()
    except OSError:
        return None, {}
    state: dict[str, Any] | None = None
    live: dict[int, tuple[int, int]] = {}  # slot -> (seq, record number)
    at, n, state_at = 0, 0, -1
    while at + _HEAD.size <= len(data):
        length, crc = _HEAD.unpack_from(data, at)
        payload = data[at + _HEAD.size : at + _HEAD.size + length]
        if len(payload) != length or zlib.crc32(payload) != crc or not payload:
            break  # a torn tail: nothing after it is trusted
        at += _HEAD.size + length
        n += 1
        kind = payload[:1]
        try:
            if kind == b"E" and length == _ENQ.size:
                _k, slot, seq = _ENQ.unpack(payload)
                live[slot] = (seq, n)
            elif kind == b"D" and length == _DEL.size:
                live.pop(_DEL.unpack(payload)[1], None)
            elif kind == b"S":
                state, state_at = json.loads(payload[1:]), n
            else:
                break
        except ValueError:
            break
    if state is None:
        return None, {}
    return state, {slot: (seq, at_n < state_at) for slot, (seq, at_n) in live.items()}


def recover_member(store: QueueStore) -> MemberCopy | None:
    """The copy in ``store`` (not yet recovered) with its member state, the store cut to
    what the log names; None when there is no usable record (absent, torn before its
    first state, a snapshot under way, or a message it covers lost)."""
    state, named = read_member(store.dir / MEMBER_FILE)
    if state is None or state.get("kept"):
        return None
    found: dict[int, tuple[int, bool]] = {}

    def keep(slot: int, size: int, delivered: bool, _expires: int) -> None:
        found[slot] = (size, delivered)

    store.recover(keep)
    held: dict[int, tuple[int, int, int]] = {}
    for slot, (seq, covered) in sorted(named.items()):
        stored = found.get(slot)
        if stored is None:
            if covered:
                log.warning("store %s: member copy lost message %d", store.label, seq)
                return None
            continue
        if seq in held:
            return None  # two records for one message: not a copy this log describes
        held[seq] = (slot, stored[0], int(stored[1]))
    for slot in found:
        if slot not in named:  # written after the last state: never acknowledged
            store.remove(slot)
    return state, held
