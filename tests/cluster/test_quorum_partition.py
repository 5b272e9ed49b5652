"""Network partitions of a quorum queue's leader, each node in a network namespace of its
own (``netns_nodes.py``): cut off from etcd but not from the other members (its lease
expires), or from the members but not from etcd (it keeps its lease, hears no majority
and steps down). Either way the two members elect a new leader. Publishers with confirms
on another node and on the leader itself, a consumer on the third; the history checker
decides. An acked message may come again only flagged ``redelivered`` (the
ack-around-failover defect ``test_quorum_sync`` names); every other broken promise fails
the test."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.history import History
from tests.cluster.netns_nodes import NetnsNode, Subnet
from tests.cluster.nodes import queue_json
from tests.cluster.quorum_queues import QUORUM, checked, consumer, own_leader, publisher, wind_down
from tests.cluster.streams import STREAM, check, leader_of, read_all
from tests.cluster.streams import publisher as stream_publisher
from tests.support import eventually


@contextlib.contextmanager
def cluster(tmp_path: Path) -> Iterator[tuple[Subnet, list[NetnsNode]]]:
    with Subnet.create(3) as net:
        etcd = EtcdServer(tmp_path / "etcd", host=net.etcd_ip).start()
        nodes = [
            net.node(k, tmp_path / f"n{k + 1}", "--cluster", etcd.url("/c"), "--node-name",
                     f"n{k + 1}", "--cluster-port", "5679", "--cluster-lease-ttl", "2")
            for k in range(3)
        ]  # fmt: skip
        try:
            for n in nodes:
                n.start()
            for other in ("n2", "n3"):
                nodes[0].wait_for_log(f"link with {other} up")
            nodes[1].wait_for_log("link with n3 up")
            yield net, nodes
        finally:
            for n in nodes:
                n.kill()
            etcd.kill()


@pytest.mark.parametrize("cut_from", ["etcd", "members"])
def test_a_leader_cut_off_by_a_partition_loses_nothing_confirmed(
    cut_from: str, tmp_path: Path
) -> None:
    with cluster(tmp_path) as (net, (n1, n2, n3)):
        h = History()
        stop, hold, moved = threading.Event(), threading.Event(), threading.Event()
        stop_publishing = threading.Event()
        times: list[tuple[float, float]] = []  # (began, confirmed) through n2
        old_leader_times: list[tuple[float, float]] = []  # through n1
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("work", durable=True, arguments=QUORUM)
        threads = [
            threading.Thread(target=publisher, args=(n2, "p", "work", h, stop_publishing, times)),
            threading.Thread(
                target=publisher, args=(n1, "o", "work", h, stop_publishing, old_leader_times)
            ),
            threading.Thread(target=consumer, args=(n3, "work", h, stop, hold, moved, [])),
        ]
        try:
            for t in threads:
                t.start()
            eventually(lambda: len(h.acked) > 200, 30, "publishing never got going")
            hold.set()  # acks stop: those in flight at the cut are not recorded
            time.sleep(0.5)
            cut = [net.etcd_ip] if cut_from == "etcd" else [net.ips[1], net.ips[2]]
            net.cut(0, *cut)
            cut_at = time.monotonic()  # a publish begun before it may be confirmed after
            # the members elect one of them: n1's lease expires (etcd) or n1 hears no
            # majority for two lease TTLs (4 s) and resigns (members)
            eventually(lambda: own_leader(n3, "work") in ("n2", "n3"), 30, "no failover")
            new_leader = str(own_leader(n3, "work"))
            print(f"\nnew leader {new_leader} seen {time.monotonic() - cut_at:.1f} s after the cut")
            healed_at = time.monotonic()
            if cut_from == "members":
                # n1's link with the new leader heals first, inside the links' 6 s silence
                # limit (the new leader is seen 4.4-5 s after the cut): never declared
                # dead, it delivers what each side sent into the cut. The consumer holds
                # its old deliveries (no credit on n3) until n1 follows: what n1 asks of
                # n3 meanwhile (a relayed subscription, drops of what n1 sent ahead)
                # meets n3's whole backlog (once lost its oldest block)
                net.heal(0, net.ips[2])
                cut = [net.ips[1]]
            # a publisher on a majority node is confirmed by the new leader
            eventually(
                lambda: sum(1 for began, _c in times if began > cut_at) > 200,
                40,
                "no confirms after the cut",
            )
            if cut_from == "etcd":
                moved.set()
                healed_at = time.monotonic()
            net.heal(0, *cut)
            # nothing begun through the cut-off n1 was confirmed while it was cut off
            # (members: it could reach no majority; etcd: its stand-in reached n2/n3)
            if cut_from == "members":
                assert [c for b, c in old_leader_times if cut_at < b and c < healed_at] == []
                assert "stepping down" in n1.log
            after = len(h.confirmed)
            eventually(lambda: len(h.confirmed) > after + 200, 40, "stalled after the heal")
            # the old leader follows the new one: in its online members, and its own view
            eventually(
                lambda: (
                    "n1" in queue_json(n2, "work")["online"]  # type: ignore[operator]
                    and own_leader(n1, "work") == new_leader
                ),
                40,
                "the old leader never followed",
            )
            moved.set()
            leaders = {str(queue_json(n, "work")["leader"]) for n in (n1, n2, n3)}
            assert leaders == {new_leader}  # one leader, the same on every node
            wind_down(h, threads[:2], threads[2], stop, stop_publishing)
            checked(h)
        finally:
            stop.set()
            stop_publishing.set()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log


def test_a_stream_leader_cut_from_its_members_steps_down(tmp_path: Path) -> None:
    """A replicated stream's leader cut off from its members, not from etcd: it hears
    no majority for two lease TTLs and resigns; a member with the longest log leads, a
    publisher on n2 is confirmed again, and after the heal n1 follows; every confirmed
    message is in the new leader's log, offsets without a gap, nothing twice."""
    with cluster(tmp_path) as (net, (n1, n2, n3)):
        confirmed: list[bytes] = []
        stop = threading.Event()
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("log", durable=True, arguments=STREAM)
        t = threading.Thread(target=stream_publisher, args=(n2, "log", confirmed, stop))
        try:
            t.start()
            eventually(lambda: len(confirmed) > 100, 30, "publishing never got going")
            net.cut(0, net.ips[1], net.ips[2])
            cut_at = time.monotonic()
            eventually(lambda: leader_of(n3, "log") in ("n2", "n3"), 30, "no failover")
            new_leader = leader_of(n3, "log")
            print(
                f"\nnew stream leader {new_leader} {time.monotonic() - cut_at:.1f} s after the cut"
            )
            before = len(confirmed)
            eventually(lambda: len(confirmed) > before + 100, 40, "no confirms after the cut")
            assert "stepping down" in n1.log
            net.heal(0, net.ips[1], net.ips[2])
            after = len(confirmed)
            eventually(lambda: len(confirmed) > after + 100, 40, "stalled after the heal")
            eventually(
                lambda: (
                    "n1" in queue_json(n2, "log")["online"]  # type: ignore[operator]
                    and leader_of(n1, "log") == new_leader
                ),
                40,
                "the old leader never followed",
            )
            stop.set()
            t.join(20)
            home = n2 if new_leader == "n2" else n3
            check(read_all(home, "log", at_least=len(confirmed)), confirmed)
        finally:
            stop.set()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log
