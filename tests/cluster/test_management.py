"""Management sees the whole cluster from any node, as RabbitMQ's API does: /api/nodes
lists every member (a down one with ``running: false``), each queue says its home
``node`` and its figures come from there, connections, channels and consumers of every
node are listed, the overview counts them all, and ``roost ctl cluster_status`` shows
the members."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pika
import pytest

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.management_api import api
from tests.support import RoostProcess, eventually

TTL = ("--cluster-lease-ttl", "4")  # short, with room for a loaded box


def ctl(server: RoostProcess, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "roost", "ctl", "--url", server.http_url, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_any_node_shows_the_whole_cluster(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", *TTL, prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", *TTL, prefix=etcd_prefix).start()
    try:
        c1 = pika.BlockingConnection(pika.URLParameters(n1.url))
        c2 = pika.BlockingConnection(pika.URLParameters(n2.url))
        ch1, ch2 = c1.channel(), c2.channel()
        ch1.queue_declare("on-n1", durable=True)
        ch2.queue_declare("on-n2", durable=True)
        ch1.confirm_delivery()
        for i in range(3):
            ch1.basic_publish("", "on-n1", b"m%d" % i)
        ch2.basic_consume("on-n1", lambda *a: None)  # a consumer on n2 of n1's queue
        c2.process_data_events(0.2)

        for server, name in ((n1, "n1"), (n2, "n2")):  # the same view from either node
            nodes = {n["name"]: n for n in api(server, "/api/nodes")}
            assert set(nodes) == {"n1", "n2"}
            assert nodes["n1"]["running"] and nodes["n2"]["running"]
            assert nodes["n1"]["os_pid"] != nodes["n2"]["os_pid"]  # each answered for itself
            queues = {q["name"]: q for q in api(server, "/api/queues")}
            assert queues["on-n1"]["node"] == "n1" and queues["on-n2"]["node"] == "n2"
            # the figures are the home node's, wherever asked
            assert eventually(lambda s=server: api(s, "/api/queues/%2F/on-n1")["messages"] == 3)
            assert api(server, "/api/queues/%2F/on-n1")["node"] == "n1"
            # published on n1: only the home node's figures count it (n2's stand-in: 0)
            assert api(server, "/api/queues/%2F/on-n1")["message_stats"]["publish"] == 3
            conns = api(server, "/api/connections")
            assert sorted(c["node"] for c in conns) == ["n1", "n2"]
            assert sorted(c["node"] for c in api(server, "/api/channels")) == ["n1", "n2"]
            consumers = api(server, "/api/consumers")
            assert [(c["queue"]["name"], c["node"]) for c in consumers] == [("on-n1", "n2")]
            overview = api(server, "/api/overview")
            assert overview["object_totals"]["connections"] == 2
            assert overview["object_totals"]["consumers"] == 1
            assert overview["queue_totals"]["messages"] == 3
            assert overview["node"] == name
            # one cluster name on every node, as RabbitMQ's: by default the first node's
            assert overview["cluster_name"] == "n1"
            assert api(server, "/api/cluster-name") == {"name": "n1"}
        for conn in (c1, c2):  # what each node's AMQP connections announce
            assert conn._impl.server_properties["cluster_name"] == "n1"
        # renamed on one node (the cluster_name global parameter): every node, and back
        auth = ("guest", "guest")
        renamed = httpx.put(n1.http_url + "/api/cluster-name", json={"name": "blue"}, auth=auth)
        assert renamed.status_code == 204
        eventually(lambda: api(n2, "/api/cluster-name") == {"name": "blue"})
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as c:
            assert c._impl.server_properties["cluster_name"] == "blue"
        cleared = httpx.delete(n2.http_url + "/api/global-parameters/cluster_name", auth=auth)
        assert cleared.status_code == 204
        eventually(lambda: api(n1, "/api/cluster-name") == {"name": "n1"})

        # Prometheus: each node counts the queues it homes and names itself and its peers
        for server, name, peer, ready in ((n1, "n1", "n2", 3), (n2, "n2", "n1", 0)):
            text = httpx.get(f"http://127.0.0.1:{server.prometheus_port}/metrics").text
            assert f'rabbitmq_node="{name}"' in text
            assert f'erlang_vm_dist_node_state{{peer="{peer}"}} 3' in text
            assert f"rabbitmq_queue_messages {ready}" in text

        status = ctl(n1, "cluster_status")
        assert "Cluster status of node n1" in status
        assert "Cluster name: n1" in ctl(n2, "cluster_status")
        running = status.split("Running Nodes")[1].split("Alarms")[0].split()
        assert running == ["n1", "n2"]
        # one connection of another node, through n1: shown, then closed
        name = next(c["name"] for c in api(n1, "/api/connections") if c["node"] == "n2")
        path = f"/api/connections/{quote(name, safe='')}"
        assert api(n1, path)["node"] == "n2"
        closed = httpx.delete(
            n1.http_url + path, auth=("guest", "guest"), headers={"X-Reason": "by n1"}
        )
        assert closed.status_code == 204
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker, match="by n1"):
            c2.process_data_events(5)
        assert httpx.get(n1.http_url + path, auth=("guest", "guest")).status_code == 404
        c1.close()

        n2.kill()  # kill -9: its lease expires, it stays listed, not running

        def n2_down() -> bool:
            nodes = {n["name"]: n for n in api(n1, "/api/nodes")}
            return set(nodes) == {"n1", "n2"} and nodes["n2"]["running"] is False

        assert eventually(n2_down, timeout=15)
        queues = {q["name"]: q for q in api(n1, "/api/queues")}
        assert queues["on-n2"]["node"] == "n2" and queues["on-n2"]["state"] == "down"
        status = ctl(n1, "cluster_status")
        assert status.split("Running Nodes")[1].split("Alarms")[0].split() == ["n1"]
        assert status.split("Disk Nodes")[1].split("Running Nodes")[0].split() == ["n1", "n2"]
        started = time.monotonic()
        assert api(n1, "/api/connections") == []  # a down member is not waited for
        assert time.monotonic() - started < 2
    finally:
        n1.kill()
        n2.kill()
    assert "Traceback" not in n1.log, n1.log
