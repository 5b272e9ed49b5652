"""Which members of a quorum queue's group follow before their leader's first frame, and
whose position counts in an election (``cluster/quorum/regroup.py``), sans-IO.

The CI failure these guard against: a node taken out of a group (``shrink``) and added
back (``grow``) dropped the leader's snapshot, which reached it just before the group
record did; the leader was killed before resending it, so the new member had no copy,
wrote no position, and the two survivors never heard from a majority (no leader)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from roost.cluster.quorum.regroup import Regroup

KEY = ("/", "q")
RECORD = "/c/quorum/%2F/q"


def manager(name: str = "n2") -> Any:
    stand_in = SimpleNamespace(remote=True)
    vhost = SimpleNamespace(queues={"q": stand_in})
    m = SimpleNamespace(
        prefix="/c", name=name, groups={}, following={}, leading={}, tasks={},
        broker=SimpleNamespace(catalog=SimpleNamespace(vhosts={"/": vhost})),
    )  # fmt: skip
    m.follow = lambda key: m.following.setdefault(key, SimpleNamespace(store=None))
    return m


def record(*members: str) -> bytes:
    return json.dumps({"members": list(members), "leader": "n1", "term": 9}).encode()


def test_a_member_added_while_the_node_runs_follows_at_once() -> None:
    m = manager()
    regroup = Regroup(m)
    regroup.read_at_start([(RECORD, record("n1", "n3"))])  # not in it at the start
    regroup._seen(RECORD, record("n1", "n3", "n2"))  # grow n2
    assert KEY in m.following
    assert not regroup.forgot(KEY, 0)  # it acked nothing in this group: (0, 0) counts


def test_taken_out_then_added_back_follows_again() -> None:
    m = manager()
    regroup = Regroup(m)
    regroup.read_at_start([])
    regroup._seen(RECORD, record("n1", "n2", "n3"))  # a new queue's group
    m.following.clear()  # the copy it had (shrink destroys it)
    regroup._seen(RECORD, record("n1", "n3"))
    assert regroup.excluded(KEY)  # frames in flight are stale now
    regroup._seen(RECORD, record("n1", "n3", "n2"))
    assert not regroup.excluded(KEY) and KEY in m.following


def test_a_member_at_the_nodes_start_waits_for_the_leaders_frame_and_does_not_count() -> None:
    m = manager()
    regroup = Regroup(m)
    regroup.read_at_start([(RECORD, record("n1", "n2", "n3")), ("/c/quorum-drain/n3", b"{}")])
    assert KEY not in m.following  # no copy: it dropped the one it had at the restart
    assert regroup.forgot(KEY, 0)  # it may have acked records: an empty position lies
    assert not regroup.forgot(KEY, 12)  # a whole snapshot of term 12 taken: it counts


def test_before_the_group_records_are_read_no_member_counts_without_a_snapshot() -> None:
    regroup = Regroup(manager())
    assert regroup.forgot(KEY, 0)
    assert not regroup.forgot(KEY, 3)


def test_a_node_that_leads_or_shows_no_stand_in_does_not_follow() -> None:
    m = manager()
    m.leading[KEY] = object()
    regroup = Regroup(m)
    regroup.read_at_start([])
    regroup._seen(RECORD, record("n1", "n2"))
    assert KEY not in m.following
    m = manager("n3")
    m.broker.catalog.vhosts["/"].queues.clear()  # the definition not here yet
    regroup = Regroup(m)
    regroup.read_at_start([])
    regroup._seen(RECORD, record("n1", "n3"))
    assert KEY not in m.following
