"""A member that is new, returning or far behind catches up from a snapshot that the
leader streams in chunks: ``RESET`` and the first messages, then ``SNAP`` chunks, each
but the last ending with ``MORE``. A chunk goes out only when the link's send buffer has
room (the kernel's, then the transport's high-water mark), so the leader's memory stays
bounded whatever the queue's length: about one chunk, where one frame of the whole
queue cost its size twice over (the records and their encoding).

The snapshot stands for the leader's log at ``upto``: the messages live then, read from
the leader's store chunk by chunk. A message removed while the stream runs is skipped
(its ``DEL`` comes after, in the backlog); records written meanwhile wait in ``backlog``
and follow the last chunk as an ordinary batch from ``upto + 1``. The member
acknowledges ``upto`` only once the last chunk is on its disk, so it counts towards
the majority, and shows as ``online``, only then.

Why a returning member with a kept copy (``rejoining.adopt_copies``) gets a whole
snapshot too, not only what it lacks: a delta would be sound only if a message number
its copy holds as committed named the same message on the leader, and a leader
recovered from its own disk (``manager._rejoin``) numbers its messages afresh from 1
(``QueueBase.restore``), so the same number may name another message there. A snapshot
names the highest number given so far (``records.reset``), so a promoted member at
least never gives a number twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from roost.cluster.link import frames as f
from roost.cluster.quorum import records as r
from roost.cluster.wire import properties_of

if TYPE_CHECKING:
    from roost.cluster.link.transport import Link
    from roost.cluster.quorum.leader import Replicator

log = logging.getLogger("roost.cluster.quorum")

CHUNK_BYTES = 512 * 1024  # records per frame, so no frame is a giant one
WRITABLE_POLL = 0.005  # seconds between looks at a full send buffer


class SnapshotStream:
    def __init__(self, rep: Replicator, member: str, link: Link) -> None:
        self.rep = rep
        self.member = member
        self.link = link
        self.term = rep.term
        self.upto = rep.index
        self.top = rep.queue._seq  # the highest number given, acked messages' too
        self.numbering = rep.queue.numbering
        self.seqs = list(rep.live)  # the messages live at ``upto``, in the queue's order
        self.backlog: list[bytes] = []  # records after ``upto``, sent after the last chunk
        self.task = asyncio.get_running_loop().create_task(self._run())
        self.task.add_done_callback(self._done)

    def cancel(self) -> None:
        self.task.cancel()

    def _alive(self) -> bool:
        rep = self.rep
        return (
            not rep.deposed
            and rep.term == self.term
            and rep.streams.get(self.member) is self
            and self.member in rep.followers
            and self.link.up
        )

    async def _run(self) -> None:
        rep, q = self.rep, self.rep.queue
        chunk, size, sent = [r.reset(self.upto, self.top, self.numbering)], 0, 0
        for seq in self.seqs:
            entry = rep.live.get(seq)
            if entry is None:
                continue  # removed since: its DEL is in the backlog
            message = entry.message
            if message is None and q.store is not None:
                _s, _r, ex, rk, props, raw = q.store.read(entry.slot)
                from roost.core.message import Message, Properties

                message = Message(ex, rk, Properties(*props), raw)
            assert message is not None
            record = r.enq(
                seq,
                entry.deliveries,
                message.exchange,
                message.routing_key,
                properties_of(message),
                message.body,
            )
            chunk.append(record)
            size += len(record)
            sent += 1
            if size >= CHUNK_BYTES:
                chunk.append(r.mark(r.MORE, self.upto))
                if not await self._send(chunk):
                    return
                chunk, size = [r.snap(self.upto, sent)], 0
        if not await self._send(chunk):
            return
        if self.backlog:
            self.link.send(
                f.Replicate(
                    q.vhost.name, q.name, self.term, self.upto + 1, rep.commit_index, self.backlog
                )
            )
        del rep.streams[self.member]
        log.info(
            "queue '%s': snapshot of %d messages (log index %d) sent to %s",
            q.name, sent, self.upto, self.member,
        )  # fmt: skip

    async def _send(self, chunk: list[bytes]) -> bool:
        """One chunk, once the link has room for it; False when the stream is over."""
        while self._alive() and not self.link.writable:
            await asyncio.sleep(WRITABLE_POLL)
        if not self._alive():
            return False
        q = self.rep.queue
        frame = f.Replicate(q.vhost.name, q.name, self.term, 0, self.rep.commit_index, chunk)
        self.link.send(frame)
        await asyncio.sleep(0)  # the link writes it in this turn's flush
        return True

    def _done(self, task: asyncio.Task[None]) -> None:
        rep = self.rep
        if rep.streams.get(self.member) is self:  # ended early: the member needs another
            del rep.streams[self.member]
            if not rep.deposed:
                rep.resync(self.member)
        if not task.cancelled():
            with contextlib.suppress(asyncio.CancelledError):
                if task.exception() is not None:
                    log.warning("snapshot to %s failed: %r", self.member, task.exception())
