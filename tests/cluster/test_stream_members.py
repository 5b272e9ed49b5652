"""A replicated stream's members changed on 3 real nodes with a real etcd, through
``roost ctl queues add-member | delete-member`` (as ``rabbitmq-queues`` does for
streams): a new member makes its copy and catches up, a member taken out drops its
files, a leader taken out hands over; the remaining copies are read back record for
record; a stream declared while two nodes run grows onto the third when it joins."""

from __future__ import annotations

import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from roost.cluster.quorum.members import RECONCILE
from roost.store.paths import stream_dir
from tests.cluster.conftest import node
from tests.cluster.nodes import TTL, three_nodes
from tests.cluster.quorum_queues import ctl, members
from tests.cluster.quorum_queues import publish as publish_each
from tests.cluster.streams import leader_of, online, publish, replica
from tests.support import eventually


def test_a_stream_grows_to_a_third_member_and_members_leave(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    copy = {f"n{i}": stream_dir(n.data_dir, "/", "sm") for i, n in enumerate(nodes, 1)}
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare(
                "sm", durable=True,
                arguments={"x-queue-type": "stream", "x-initial-cluster-size": 2},
            )  # fmt: skip
        eventually(lambda: online(n1, "sm") == ["n1", "n2"], 10, "never in sync")
        eventually(lambda: members(n3, "sm") == ["n1", "n2"], 10)
        assert not copy["n3"].exists()
        first = [b"a%04d" % i for i in range(300)]
        publish(n1, "sm", first)
        # asked of n2 (not the leader): n3 makes its copy and takes the 300
        assert "n3" in ctl(n2, "queues", "add-member", "sm", "n3").stdout
        for server in nodes:
            eventually(lambda s=server: members(s, "sm") == ["n1", "n2", "n3"], 10)  # type: ignore[misc]
        eventually(lambda: online(n1, "sm") == ["n1", "n2", "n3"], 20, "n3 never caught up")
        assert "already a member" in ctl(n1, "queues", "add-member", "sm", "n3", ok=False).stderr
        second = [b"b%04d" % i for i in range(20)]
        publish_each(n3, "sm", second)  # through n3's stand-in, each confirmed
        # a member leaves: its files go, the other two keep serving and confirming
        ctl(n3, "queues", "delete-member", "sm", "n2")
        for server in nodes:
            eventually(lambda s=server: members(s, "sm") == ["n1", "n3"], 10)  # type: ignore[misc]
        eventually(lambda: not copy["n2"].exists(), 10, "n2's copy never went")
        third = [b"c%04d" % i for i in range(20)]
        publish_each(n2, "sm", third[:10])
        publish_each(n1, "sm", third[10:])
        eventually(lambda: online(n1, "sm") == ["n1", "n3"], 10)
        # the leader leaves: n3 leads, n1's files go, nothing confirmed is lost
        ctl(n2, "queues", "delete-member", "sm", "n1")
        eventually(lambda: leader_of(n2, "sm") == "n3", 20, "n3 never took over")
        eventually(lambda: members(n1, "sm") == ["n3"], 10)
        eventually(lambda: not copy["n1"].exists(), 10, "n1's copy never went")
        fourth = [b"d%04d" % i for i in range(10)]
        publish_each(n1, "sm", fourth)
    finally:
        for server in nodes:
            server.kill()
    assert not copy["n1"].exists() and not copy["n2"].exists()
    held = replica(n3, "sm")
    assert [offset for offset, _t, _b in held] == list(range(len(held)))
    assert [body for _o, _t, body in held] == first + second + third + fourth
    for server in nodes:
        assert "Traceback" not in server.log, server.log


def test_a_stream_grows_back_to_its_size_when_a_node_joins(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = [
        node(shared_etcd, tmp_path / f"n{i}", f"n{i}", *TTL, prefix=etcd_prefix) for i in (1, 2, 3)
    ]
    n1, n2, n3 = nodes
    n1.start()
    n2.start()
    try:
        n1.wait_for_log("link with n2 up")
        # declared while two nodes run: members n1 and n2, target 3 (the default size)
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("gb", durable=True, arguments={"x-queue-type": "stream"})
        eventually(lambda: online(n1, "gb") == ["n1", "n2"], 10, "never in sync")
        bodies = [b"g%04d" % i for i in range(200)]
        publish(n1, "gb", bodies)
        n3.start()
        eventually(lambda: members(n1, "gb") == ["n1", "n2", "n3"], 20, "never grew back")
        eventually(lambda: online(n1, "gb") == ["n1", "n2", "n3"], 20, "n3 never caught up")
        more = [b"h%04d" % i for i in range(20)]
        publish_each(n3, "gb", more)
        # every member holds (on disk) everything committed before the kills
        eventually(lambda: online(n1, "gb") == ["n1", "n2", "n3"], 20)
    finally:
        for server in nodes:
            server.kill()
    copies = [replica(server, "gb") for server in nodes]
    assert copies[0] == copies[1] == copies[2]
    assert [body for _o, _t, body in copies[2]] == bodies + more
    for server in nodes:
        assert "Traceback" not in server.log, server.log


def test_shrink_moves_a_nodes_stream_replicas_and_grow_brings_them_back(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    """``roost ctl queues shrink NODE`` (decommission) moves NODE's stream replicas, a
    stream it leads too, to other nodes without lowering the groups' sizes, and drained
    NODE is not grown back onto; ``grow NODE`` adds it again."""
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("s3", durable=True, arguments={"x-queue-type": "stream"})
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as conn:  # led by n2
            conn.channel().queue_declare(
                "s2", durable=True,
                arguments={"x-queue-type": "stream", "x-initial-cluster-size": 2},
            )  # fmt: skip
        eventually(lambda: online(n1, "s3") == ["n1", "n2", "n3"], 10, "never in sync")
        eventually(lambda: online(n2, "s2") == ["n1", "n2"], 10, "never in sync")
        bodies = [b"s%04d" % i for i in range(100)]
        publish(n2, "s2", bodies)
        rows = ctl(n1, "--json", "queues", "shrink", "n2").stdout
        assert rows.count('"ok"') == 2, rows  # both streams
        for server in nodes:
            eventually(lambda s=server: members(s, "s3") == ["n1", "n3"], 15)  # type: ignore[misc]
        # s2's leader left: n1 took over and grew back onto n3, the one node not drained
        eventually(lambda: members(n1, "s2") == ["n1", "n3"], 30, "s2 never moved off n2")
        eventually(lambda: online(n1, "s2") == ["n1", "n3"], 20, "n3 never caught up")
        more = [b"t%04d" % i for i in range(10)]
        publish_each(n2, "s2", more)  # through n2's stand-in
        # the absence of a change: s3's target is 3, but n2 is drained
        time.sleep(2 * RECONCILE + 0.5)
        assert members(n1, "s3") == ["n1", "n3"]
        assert not stream_dir(n2.data_dir, "/", "s3").exists()
        ctl(n3, "queues", "grow", "n2")
        eventually(lambda: members(n1, "s3") == ["n1", "n2", "n3"], 15, "s3 never grew")
        eventually(lambda: members(n1, "s2") == ["n1", "n2", "n3"], 15, "s2 never grew")
        eventually(lambda: online(n1, "s2") == ["n1", "n2", "n3"], 20, "n2 never caught up")
    finally:
        for server in nodes:
            server.kill()
    copies = [replica(server, "s2") for server in nodes]
    assert copies[0] == copies[1] == copies[2]
    assert [body for _o, _t, body in copies[2]] == bodies + more
    for server in nodes:
        assert "Traceback" not in server.log, server.log


def test_a_member_taken_out_while_down_drops_its_copy_when_it_returns(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    copy = stream_dir(n3.data_dir, "/", "gone")
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("gone", durable=True, arguments={"x-queue-type": "stream"})
        eventually(lambda: online(n1, "gone") == ["n1", "n2", "n3"], 10, "never in sync")
        bodies = [b"g%04d" % i for i in range(50)]
        publish(n1, "gone", bodies)
        eventually(lambda: any(copy.glob("*.seg")), 10)
        n3.kill()
        n1.wait_for_log("link with n3 down")
        ctl(n2, "queues", "delete-member", "gone", "n3")
        eventually(lambda: members(n1, "gone") == ["n1", "n2"], 10)
        assert any(copy.glob("*.seg"))  # n3 was down: its files are still there
        n3.start()
        eventually(lambda: not copy.exists(), 20, "n3's copy never went")
        n3.wait_for_log("taken out of its group while down")
        assert members(n3, "gone") == ["n1", "n2"]
        more = [b"h%04d" % i for i in range(10)]
        publish_each(n3, "gone", more)  # n3 serves it through its stand-in
        eventually(lambda: online(n1, "gone") == ["n1", "n2"], 10)
        assert not copy.exists()  # nothing shipped to it made it again
    finally:
        for server in nodes:
            server.kill()
    assert [body for _o, _t, body in replica(n2, "gone")] == bodies + more
    for server in nodes:
        assert "Traceback" not in server.log, server.log
