"""A replicated stream's members changed on 3 real nodes with a real etcd, through
``roost ctl queues add-member | delete-member`` (as ``rabbitmq-queues`` does for
streams): a new member makes its copy and catches up, a member taken out drops its
files, a leader taken out hands over; the remaining copies are read back record for
record; a stream declared while two nodes run grows onto the third when it joins."""

from __future__ import annotations

from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from roost.store.paths import stream_dir
from tests.cluster.conftest import node
from tests.cluster.streams import leader_of, online, publish, replica
from tests.cluster.test_quorum import TTL, three_nodes
from tests.cluster.test_quorum_members import ctl, members
from tests.cluster.test_quorum_members import publish as publish_each
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
