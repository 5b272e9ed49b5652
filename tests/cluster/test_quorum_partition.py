"""Network partitions of a quorum queue's leader, each node in a network namespace of its
own (``netns_nodes.py``): cut off from etcd but not from the other members, or from the
members but not from etcd. Publishers with confirms on another node and on the leader
itself, a consumer on the third; the history checker decides. An acked message may come
again only flagged ``redelivered`` (the ack-around-failover defect ``test_quorum_sync``
names); every other broken promise fails the test."""

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
from tests.cluster.test_quorum import QUORUM, consumer, publisher, queue_json, wind_down
from tests.cluster.test_quorum_sync import own_leader
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


def checked(h: History) -> None:
    again = set(h.redelivered_after_ack)
    flags = {m: [r for _q, d, r in h.deliveries if d == m][1:] for m in again}
    assert [m for m, f in flags.items() if not all(f)] == [], "acked, delivered again unflagged"
    assert [p for p in h.problems() if not p.startswith("delivered again after its ack")] == []


@pytest.mark.parametrize("cut_from", ["etcd", "members"])
def test_a_leader_cut_off_by_a_partition_loses_nothing_confirmed(
    cut_from: str, tmp_path: Path
) -> None:
    with cluster(tmp_path) as (net, (n1, n2, n3)):
        h = History()
        stop, hold, moved = threading.Event(), threading.Event(), threading.Event()
        stop_publishing = threading.Event()
        times: list[tuple[float, float]] = []
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("work", durable=True, arguments=QUORUM)
        threads = [
            threading.Thread(target=publisher, args=(n2, "p", "work", h, stop_publishing, times)),
            threading.Thread(target=publisher, args=(n1, "o", "work", h, stop_publishing, [])),
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
            before = len(h.confirmed)
            if cut_from == "etcd":  # its lease expires: a member takes over
                eventually(lambda: own_leader(n3, "work") in ("n2", "n3"), 30, "no failover")
                eventually(lambda: len(h.confirmed) > before + 200, 30, "no confirms after")
            else:  # it keeps its lease: nothing more can be committed, by anyone
                time.sleep(8)  # past the links' dead time (6 s)
                print(f"\nconfirmed while the leader was cut from the members: "
                      f"{len(h.confirmed) - before}")  # fmt: skip
            moved.set()
            net.heal(0, *cut)
            after = len(h.confirmed)
            eventually(lambda: len(h.confirmed) > after + 200, 40, "stalled after the heal")
            leaders = {str(queue_json(n, "work")["leader"]) for n in (n1, n2, n3)}
            assert len(leaders) == 1, leaders  # one leader, the same on every node
            wind_down(h, threads[:2], threads[2], stop, stop_publishing)
            checked(h)
        finally:
            stop.set()
            stop_publishing.set()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log
