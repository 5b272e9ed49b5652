"""Raft's commit rule for a replicated stream's leader (§5.4.2, "Figure 8"), sans-IO.

A new leader's log may end with records of older terms. Raft commits those only
together with an entry of the leader's own term (a new leader appends an empty one), so
that the members holding them rank above any member with a conflicting record of an
intermediate term. A stream's records are offsets consumers see, so the marker is the
leader's ``SYNC`` placed at the end of the log it was elected with: a member ranks with
the new term once it took the ``SYNC`` and holds everything up to there, and the leader
commits its inherited records only once a majority does.

Figure 8 on five members: s1 (term 4) inherited offsets 5 and 6 of older terms, s5
holds another offset 5 from term 3. s2 and s3 hold offset 5 but not 6: they still rank
with their older term, below s5, so offset 5 must not commit yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from roost.cluster.link import frames as f
from roost.cluster.quorum.stream_follower import StreamFollower
from roost.cluster.quorum.stream_leader import (
    SYNC_HEAD,
    StreamReplicator,
    commit_point,
    encode,
    sync_record,
)
from roost.core.message import Properties
from roost.core.queues.streams import Streams
from roost.store.memory import MemoryStore
from roost.store.memory_streams import MemoryStreams


class _Log:
    def __init__(self, end: int, mark: int) -> None:
        self.next_offset = end
        self.first_offset = 0
        self.committed_mark = mark

    def mark_committed(self, offset: int) -> None:
        self.committed_mark = offset

    def reader(self, start: int) -> Any:
        return _Reader()


class _Reader:
    def next_tagged(self) -> None:
        return None

    def close(self) -> None:
        pass


class _Queue:
    def __init__(self, log: _Log) -> None:
        self.log = log
        self.committed: int | None = None
        self.consumers: list[Any] = []
        self.vhost = type("V", (), {"name": "/"})()
        self.name = "s"

    def dispatch(self) -> None:
        pass

    def _where(self) -> str:
        return "stream 's'"


class _Pending:
    def __init__(self) -> None:
        self.issued = 0
        self.finished: list[int] = []

    def issue(self) -> int:
        self.issued += 1
        return self.issued

    def finish(self, number: int, error: Exception | None = None) -> None:
        self.finished.append(number)


class _Store:
    def when_durable(self, callback: Callable[[bool], None]) -> None:
        callback(True)


class _Broker:
    def __init__(self) -> None:
        self.pending = _Pending()
        self.message_store = _Store()


class _Link:
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.sent: list[f.Frame] = []

    def send(self, frame: f.Frame) -> None:
        self.sent.append(frame)


class _Links:
    def __init__(self, members: list[str]) -> None:
        self.links = {m: _Link(m) for m in members}

    def link(self, member: str) -> _Link | None:
        return self.links.get(member)


def _ack(member: str, rep: StreamReplicator, durable: int) -> None:
    rep.acknowledged(member, f.ReplicateAck("/", "s", rep.term, durable, True))


def test_a_new_leader_commits_older_terms_records_only_once_a_majority_holds_them_all() -> None:
    async def run() -> None:
        members = ["s1", "s2", "s3", "s4", "s5"]
        # s1, elected in term 4: offsets 0..4 known committed, 5 and 6 of older terms
        log = _Log(end=7, mark=5)
        queue = _Queue(log)
        broker = _Broker()
        links = _Links(members[1:])
        rep = StreamReplicator(broker, links, queue, "s1", members)  # type: ignore[arg-type]
        rep.started(4)
        assert rep.commit == queue.committed == 5  # what an earlier leader committed
        sync = links.links["s2"].sent[0]
        assert isinstance(sync, f.Replicate)
        assert SYNC_HEAD.unpack(sync.entries[0])[1:] == (5, 0, 7)  # its marker at 7
        _ack("s2", rep, 6)  # s2 and s3 hold offset 5, not 6: they still rank with
        _ack("s3", rep, 6)  # their older term, below s5's term-3 log with another 5
        assert rep._majority_holds() == 6  # a majority holds offset 5 ...
        assert rep.commit == queue.committed == 5  # ... yet it is not committed
        _ack("s2", rep, 7)
        assert rep.commit == 5  # s1 and s2 hold the marker: no majority yet
        _ack("s3", rep, 7)
        assert rep.commit == queue.committed == 7  # offsets 5 and 6 commit together
        log.next_offset = 8  # from here on, as before: each record as a majority holds it
        rep.appended()
        _ack("s4", rep, 8)
        _ack("s5", rep, 8)
        assert rep.commit == 8 and broker.pending.finished == [1]  # confirmed
        rep.close()

    asyncio.run(run())


def test_a_fresh_leader_commits_by_count_as_before() -> None:
    assert commit_point(held=3, commit=0, term_start=0) == 3
    assert commit_point(held=2, commit=1, term_start=3) == 1  # older terms only
    assert commit_point(held=3, commit=1, term_start=3) == 3  # all of them: the marker
    assert commit_point(held=4, commit=1, term_start=3) == 4


def test_a_member_ranks_by_the_term_it_synced_not_the_newest_it_saw() -> None:
    """The other half of Figure 8: a copy's position in an election names the term whose
    leader's log it is a prefix of. A batch of a newer term refused before that term's
    ``SYNC`` (a copy just restarted) must not lend its term to the older records."""

    async def run() -> None:
        follower = StreamFollower(Streams(MemoryStreams()), MemoryStore(), "/", "s", {})
        link = _Link("leader")
        props = Properties().as_tuple()
        rec = [encode((i, 0, "", "s", props, b"x%d" % i)) for i in range(8)]
        follower.receive(link, f.Replicate("/", "s", 3, 0, 0, [sync_record(0, 0, 0)]))
        follower.receive(link, f.Replicate("/", "s", 3, 0, 5, rec[:7]))  # 5 and 6: term 3's
        assert follower.position == (3, 7)
        follower.receive(link, f.Replicate("/", "s", 4, 7, 6, rec[7:]))  # no SYNC of 4 yet
        assert isinstance(link.sent[-1], f.ReplicateAck) and not link.sent[-1].ok
        # still term 3's log: a member holding term 4's marker and its offsets 5 and 6
        # (position (4, 7)) ranks above it
        assert follower.position == (3, 7) < (4, 7)
        # term 4's leader was elected with 7 records (its marker at 7): the copy keeps
        # what it knew committed and ranks with term 4 only once it holds all 7
        follower.receive(link, f.Replicate("/", "s", 4, 0, 5, [sync_record(5, 0, 7)]))
        assert follower.position == (3, 5)
        follower.receive(link, f.Replicate("/", "s", 4, 5, 5, rec[5:6]))
        assert follower.position == (3, 6)
        follower.receive(link, f.Replicate("/", "s", 4, 6, 5, rec[6:7]))
        assert follower.position == (4, 7)
        follower.close()

    asyncio.run(run())
