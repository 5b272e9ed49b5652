"""The disk store's quorum member copies, each in the directory of its queue, and the
queue's own store on such a directory.

A copy is its queue's directory with a member record in it (``member_log.py``). Only
the member's store may recover, write or delete what is there: ``open_member``,
``recover_member`` and ``drop_member`` open that one. A store opened for the queue
itself (``DiskStore.open_queue``) on a directory holding a member record is a guest
(``GuestStore``): a leader deposed by a newer term follows it at once, its member copy
in the directory its queue used, while its definitions still say it leads until the
definitions' watch replaces the queue with a stand-in. Killed in between, at its restart
the queue is recreated from those definitions and opens a store there; as the queue's
own, it would take the copy's records for the queue's, and the swap that follows would
delete the directory (the copy the new leader counted, and its record: a node back as
one that forgot). The guest recovers nothing and deletes nothing; the copy is recovered
as a member's (``rejoining.adopt_copies``) once the queue here is a stand-in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roost.store.member_log import MEMBER_FILE, MemberLog, recover_member
from roost.store.queue_store import OWNER_FILE, QueueStore

# A recovered copy: its store, its record, its state and the leader's seq -> (slot,
# body size, times delivered).
Copy = tuple[QueueStore, MemberLog, dict[str, Any], dict[int, tuple[int, int, int]]]


class GuestStore(QueueStore):
    """The queue's store on a directory that holds a member copy: it recovers nothing
    and deletes nothing there. It is never written: the queue it serves refuses
    publishes until it is replaced (``Rejoining``; ``QuorumManager.start`` does not
    campaign for it); an append would write over the copy's segments."""

    def recover(self, keep: Callable[[int, int, bool, int], None]) -> int:
        self.dir_made = True  # the directory is there (no "data directory missing")
        return 0

    def append(self, *args: Any, **kwargs: Any) -> int:
        raise RuntimeError(f"store {self.label}: the directory holds a member copy")

    def destroy(self) -> None:
        self.deleted = True  # the queue went (its stand-in replaced it): the copy stays


class MemberCopies:
    """``DiskStore``'s part for quorum member copies."""

    data_dir: Path

    def _open_dir(self, vhost: str, name: str, *, guest: bool = False) -> QueueStore:
        """A store on the queue's directory (``DiskStore``'s); ``guest``: a
        ``GuestStore`` if that directory holds a member record."""
        raise NotImplementedError

    def open_member(self, vhost: str, name: str) -> tuple[QueueStore, MemberLog]:
        """A quorum queue member's fresh copy and its record (``store/member_log.py``)."""
        store = self._open_dir(vhost, name)
        store.member = MemberLog(store)
        return store, store.member

    def member_copies(self) -> list[tuple[str, str]]:
        """(vhost, queue) of each queue directory holding a member record."""
        found = []
        for path in sorted(self.data_dir.glob(f"vhosts/*/queues/*/{MEMBER_FILE}")):
            try:
                owner = json.loads((path.parent / OWNER_FILE).read_text("utf-8"))
                found.append((str(owner["vhost"]), str(owner["name"])))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # no owner: quarantined at start like any unclaimed directory
        return found

    def recover_member(self, vhost: str, name: str) -> Copy | None:
        """A member copy kept across a restart; None (and the copy gone) when its
        record is absent, torn before a state, or names a message the store lost."""
        store = self._open_dir(vhost, name)
        copy = recover_member(store)
        if copy is None:
            store.destroy()
            return None
        state, held = copy
        store.member = MemberLog(store, {slot: seq for seq, (slot, _s, _d) in held.items()})
        store.member.note(state)  # rewritten whole at the next commit
        return store, store.member, state, held

    def drop_member(self, vhost: str, name: str) -> None:
        """A member copy whose queue is gone (deleted while this node was down)."""
        self._open_dir(vhost, name).destroy()
