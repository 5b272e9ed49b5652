"""Cluster nodes for the tests: three nodes on one etcd, two as a pair, what etcd holds, and a
node's view of a queue or a channel on it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pika
import pytest

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.support import RoostProcess

TTL = ("--cluster-lease-ttl", "2")


def three_nodes(
    etcd: EtcdServer, prefix: str, tmp_path: Path, ttl: tuple[str, str] = TTL
) -> list[RoostProcess]:
    nodes = [node(etcd, tmp_path / f"n{i}", f"n{i}", *ttl, prefix=prefix) for i in (1, 2, 3)]
    try:
        for n in nodes:
            n.start()
        # n1 declares the queues: it must see the others running (the group is chosen
        # from the nodes running at the declaration) and have its links to them
        for other in ("n2", "n3"):
            nodes[0].wait_for_log(f"node '{other}' is up")
            nodes[0].wait_for_log(f"link with {other} up")
        nodes[1].wait_for_log("link with n3 up")
    except BaseException:
        for n in nodes:  # a failed start must not leave the others running
            n.kill()
        raise
    return nodes


def queue_json(server: RoostProcess, name: str) -> dict[str, object]:
    shown = httpx.get(f"{server.http_url}/api/queues/%2F/{name}", auth=("guest", "guest"))
    assert shown.status_code == 200, shown.text
    data: dict[str, object] = shown.json()
    return data


def etcd_keys(etcd: EtcdServer, prefix: str) -> dict[str, dict[str, object]]:
    out = subprocess.run(
        ["etcdctl", "--endpoints", etcd.endpoint, "get", "--prefix", prefix],
        capture_output=True,
        text=True,
        check=True,
        env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    return {out[i]: json.loads(out[i + 1]) for i in range(0, len(out), 2)}


@pytest.fixture
def pair(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> Iterator[tuple[RoostProcess, RoostProcess]]:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    try:
        yield n1, n2
    finally:
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log


def channel(
    server: RoostProcess, user: str = "guest", password: str = "guest"
) -> tuple[pika.BlockingConnection, pika.adapters.blocking_connection.BlockingChannel]:
    params = pika.URLParameters(f"amqp://{user}:{password}@127.0.0.1:{server.amqp_port}/%2F")
    conn = pika.BlockingConnection(params)
    return conn, conn.channel()


def refused(call: object, *args: object, **kwargs: object) -> int:
    try:
        call(*args, **kwargs)  # type: ignore[operator]
    except pika.exceptions.ChannelClosedByBroker as exc:
        return int(exc.reply_code)
    return 0
