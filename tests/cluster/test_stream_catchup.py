"""Incremental catch-up of a replicated stream's members on 3 real nodes and a real etcd:
a member killed with kill -9 keeps its copy and takes only the records it missed; a
leader killed with an uncommitted tail comes back, cuts that tail in place and takes the
new leader's records at those offsets. Every replica's files are then read back and must
hold the same records at the same offsets."""

from __future__ import annotations

import re
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from roost.store.paths import stream_dir
from roost.store.stream_truncate import read_mark
from tests.cluster.nodes import three_nodes
from tests.cluster.quorum_queues import ui_replicas
from tests.cluster.streams import STREAM, leader_of, online, publish, replica
from tests.support import RoostProcess, eventually

SYNCED = re.compile(r"member (n\d) synced at offset (\d+), shipping (\d+) records")
CUT = re.compile(r"kept offsets up to (\d+), cut (\d+) records, catching up from (\d+)")


def lines(server: RoostProcess, since: int, pattern: re.Pattern[str]) -> list[tuple[str, ...]]:
    return [m.groups() for line in server.log_lines[since:] for m in pattern.finditer(line)]


def test_a_member_killed_takes_only_what_it_missed_at_the_same_offsets(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("cu", durable=True, arguments=STREAM)
        eventually(lambda: online(n1, "cu") == ["n1", "n2", "n3"], 10, "never in sync")
        publish(n1, "cu", [b"a%05d" % i for i in range(500)])
        # one more: its batch tells the members the first 500 are committed; n3 keeps
        # that on disk (its committed mark, written within 0.1 s)
        publish(n1, "cu", [b"a00500"])
        copy = stream_dir(n3.data_dir, "/", "cu")
        eventually(lambda: read_mark(copy) >= 500, 10, "n3 never marked the commit")
        first_segment = min(copy.glob("*.seg"))
        inode = first_segment.stat().st_ino
        n3.kill()  # kill -9 of a member
        n1.wait_for_log("link with n3 down")
        eventually(lambda: online(n1, "cu") == ["n1", "n2"], 10)
        eventually(lambda: online(n2, "cu") == ["n1", "n2"], 10)  # as the page will read it
        ui_replicas(n2, "cu")  # the web UI's queue page: leader, members, n3 not online
        publish(n1, "cu", [b"b%05d" % i for i in range(2000)])
        since, since3 = len(n1.log_lines), len(n3.log_lines)
        n3.start()
        eventually(lambda: "n3" in online(n1, "cu"), 30, "n3 never caught up")
        # the leader shipped n3 only what it lacked (from offset 500 or 501: whether the
        # last record n3 held was committed when its batch left), not the 2,501 records
        # a copy from empty takes
        synced = [(int(at), int(n)) for m, at, n in lines(n1, since, SYNCED) if m == "n3"]
        assert synced, n1.log[-3000:]
        at, shipped = synced[0]
        assert 500 <= at <= 501 and at + shipped == 2501, synced
        print(f"\nn3 kept offsets below {at}, the leader shipped it {shipped} records")
        kept, cut, start = map(int, lines(n3, since3, CUT)[0])
        assert (kept, cut, start) == (at, 501 - at, at), (kept, cut, start)
        assert first_segment.stat().st_ino == inode, "n3's copy was made again"
        publish(n1, "cu", [b"c%05d" % i for i in range(100)])  # and it goes on
        eventually(lambda: online(n1, "cu") == ["n1", "n2", "n3"], 10, "n3 fell behind")
    finally:
        for n in nodes:
            n.kill()
    copies = [replica(n, "cu") for n in nodes]
    bodies = [b"a%05d" % i for i in range(501)] + [b"b%05d" % i for i in range(2000)]
    bodies += [b"c%05d" % i for i in range(100)]
    assert [(o, b) for o, _t, b in copies[0]] == list(enumerate(bodies))
    assert copies[1] == copies[0] and copies[2] == copies[0], "replicas differ"
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def test_a_leader_back_with_an_uncommitted_tail_cuts_it_in_place(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("tail", durable=True, arguments=STREAM)
        eventually(lambda: online(n1, "tail") == ["n1", "n2", "n3"], 10, "never in sync")
        publish(n1, "tail", [b"old%03d" % i for i in range(20)])
        # the leader keeps its commit on disk (its committed mark, within half a second)
        copy = stream_dir(n1.data_dir, "/", "tail")
        eventually(lambda: read_mark(copy) == 20, 10, "n1 never marked its commit")
        n2.kill()
        n3.kill()
        n1.wait_for_log("link with n2 down")
        n1.wait_for_log("link with n3 down")
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            for i in range(30):  # written by n1 alone: never committed
                ch.basic_publish("", "tail", b"lost%03d" % i)
            # frames of a channel are handled in order: the 30 are in n1's log now
            ch.queue_declare("tail", passive=True)
        n1.kill()
        # both come back while n1's election key still stands: they follow with the
        # copies they kept, and one of them is elected once the key goes
        n2.start()
        n3.start()
        eventually(lambda: leader_of(n2, "tail") in ("n2", "n3"), 40, "no new leader")
        new = n2 if leader_of(n2, "tail") == "n2" else n3
        publish(new, "tail", [b"new%03d" % i for i in range(40)])  # offsets 20..59
        since = len(n1.log_lines)
        n1.start()
        eventually(lambda: "n1" in online(new, "tail"), 30, "n1 never caught up")
        kept, cut, start = map(int, lines(n1, since, CUT)[0])
        assert (kept, cut, start) == (20, 30, 20), (kept, cut, start)
        print(f"\nn1 kept offsets below {kept}, cut {cut} records")
        assert n1.log.count("copy synced") >= 1
    finally:
        for n in nodes:
            n.kill()
    copies = [replica(n, "tail") for n in nodes]
    expected = [b"old%03d" % i for i in range(20)] + [b"new%03d" % i for i in range(40)]
    for name, copy in zip(("n1", "n2", "n3"), copies, strict=True):
        assert [(o, b) for o, _t, b in copy] == list(enumerate(expected)), name
    assert copies[0] == copies[1] == copies[2], "replicas differ"
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def test_a_member_behind_the_leaders_retention_starts_at_its_first_offset(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, _n2, n3 = nodes
    small = {
        **STREAM,
        "x-stream-max-segment-size-bytes": 4000,
        "x-max-length-bytes": 40000,
    }
    body = b"x" * 200
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("ret", durable=True, arguments=small)
        eventually(lambda: online(n1, "ret") == ["n1", "n2", "n3"], 10, "never in sync")
        publish(n1, "ret", [b"a%03d" % i + body for i in range(20)])
        eventually(lambda: online(n1, "ret") == ["n1", "n2", "n3"], 10, "n3 fell behind")
        n3.kill()
        n1.wait_for_log("link with n3 down")
        publish(n1, "ret", [b"b%04d" % i + body for i in range(1000)])  # ~230 KB
        since3 = len(n3.log_lines)
        n3.start()
        eventually(lambda: "n3" in online(n1, "ret"), 30, "n3 never caught up")
        kept, _cut, start = map(int, lines(n3, since3, CUT)[0])  # its first sync
        assert start > kept and start > 20, (kept, start)  # the leader's first offset
        print(f"\nn3 kept offsets below {kept}, started again at {start}")
    finally:
        for n in nodes:
            n.kill()
    copies = [replica(n, "ret") for n in nodes]
    assert copies[2][0][0] >= start
    assert copies[0][-1][0] == copies[2][-1][0] == 1019
    common = max(c[0][0] for c in copies)
    same = [[r for r in c if r[0] >= common] for c in copies]
    assert same[0] == same[1] == same[2] and len(same[0]) > 10, "replicas differ"
    assert [b[:5] for _o, _t, b in same[0]] == [b"b%04d" % (o - 20) for o, _t, _b in same[0]]
    for n in nodes:
        assert "Traceback" not in n.log, n.log
