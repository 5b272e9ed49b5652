"""Runtime parameters live in etcd like the other definitions: a federation upstream,
a vhost's limits and a global parameter set on one node are on the other when the HTTP
reply comes, and deleting one on one node deletes that one (and nothing else) on both.
A dynamic shovel, whose parameter is on every node, runs on one node of the cluster."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.cluster.management_api import AUTH, put, shovel_rows, status
from tests.cluster.nodes import channel, pair  # noqa: F401  (pair: the fixture)
from tests.support import RoostProcess, eventually


def delete(server: RoostProcess, path: str) -> None:
    reply = httpx.delete(server.http_url + path, auth=AUTH, timeout=10)
    assert reply.status_code == 204, (path, reply.status_code, reply.text)


def test_parameters_set_and_deleted_on_one_node_are_so_on_the_other(
    pair: tuple[RoostProcess, RoostProcess],  # noqa: F811
) -> None:
    n1, n2 = pair
    upstream = "/api/parameters/federation-upstream/%2F/up1"
    put(n1, upstream, {"value": {"uri": "amqp://127.0.0.1:1", "ack-mode": "on-confirm"}})
    put(n1, "/api/vhost-limits/%2F/max-connections", {"value": 50})
    put(n1, "/api/global-parameters/region", {"value": "eu-1"})
    code, got = status(n2, upstream)
    assert code == 200 and got["value"]["uri"] == "amqp://127.0.0.1:1"
    code, got = status(n2, "/api/global-parameters/region")
    assert code == 200 and got["value"] == "eu-1"
    code, got = status(n2, "/api/vhost-limits/%2F")
    assert code == 200 and got[0]["value"] == {"max-connections": 50}

    # set on n2, seen on n1 too
    put(n2, "/api/parameters/federation-upstream/%2F/up2", {"value": {"uri": "amqp://h2"}})
    assert status(n1, "/api/parameters/federation-upstream/%2F/up2")[0] == 200

    delete(n1, upstream)
    delete(n2, "/api/global-parameters/region")
    # read-your-writes holds for deletes too: gone on the other node when the reply came
    assert status(n2, upstream)[0] == 404
    assert status(n1, "/api/global-parameters/region")[0] == 404
    # only that one: the other upstream and the vhost's limits stay, on both nodes
    for n in (n1, n2):
        assert status(n, "/api/parameters/federation-upstream/%2F/up2")[0] == 200
        code, got = status(n, "/api/vhost-limits/%2F")
        assert code == 200 and got and got[0]["value"] == {"max-connections": 50}, (n, got)
    # and after a restart, a node loads them from etcd
    n2.stop()
    n2.start()
    eventually(lambda: status(n2, "/api/parameters/federation-upstream/%2F/up2")[0] == 200)
    assert status(n2, upstream)[0] == 404


def test_a_dynamic_shovel_runs_on_one_node_of_the_cluster(
    pair: tuple[RoostProcess, RoostProcess],  # noqa: F811
) -> None:
    """Its parameter is on every node, but one node runs it (as in RabbitMQ): from an
    exchange, two running copies would each bind a queue and move every message twice.
    When that node goes, another takes it over."""
    n1, n2 = pair
    c1, ch1 = channel(n1)
    ch1.queue_declare("landed")
    value = {"src-uri": "amqp://", "src-exchange": "amq.fanout",
             "dest-uri": "amqp://", "dest-queue": "landed"}  # fmt: skip
    put(n1, "/api/parameters/shovel/%2F/fan", {"value": value})
    eventually(lambda: shovel_rows(n1) + shovel_rows(n2) == ["fan"],
               what=lambda: (shovel_rows(n1), shovel_rows(n2)))  # fmt: skip
    runner, other = (n1, n2) if shovel_rows(n1) else (n2, n1)

    def landed() -> int:
        return int(ch1.queue_declare("landed", passive=True).method.message_count)

    def bound() -> bool:  # the shovel's own queue is bound: it would take what comes now
        _code, rows = status(runner, "/api/exchanges/%2F/amq.fanout/bindings/source")
        return bool(rows)

    eventually(bound)
    ch1.confirm_delivery()
    for i in range(3):
        ch1.basic_publish("amq.fanout", "", b"m%d" % i)
    eventually(lambda: landed() >= 3, what=landed)
    ch1.basic_publish("", "landed", b"marker")  # behind any second copy in the queue
    eventually(lambda: landed() >= 4, what=landed)
    bodies = []
    while (got := ch1.basic_get("landed", auto_ack=True))[0] is not None:
        bodies.append(got[2])
    assert sorted(bodies) == [b"m0", b"m1", b"m2", b"marker"]
    c1.close()

    runner.kill()  # the other node takes it over once the runner's lease ends
    eventually(lambda: shovel_rows(other) == ["fan"], timeout=30, what=lambda: shovel_rows(other))


def test_a_federated_exchange_brings_each_message_once_into_the_cluster(
    pair: tuple[RoostProcess, RoostProcess],  # noqa: F811
    tmp_path: Path,
) -> None:
    """The upstream and the policy are on both nodes, and a message published upstream
    arrives once, not once per node: the nodes announce one cluster name, so their
    links share one queue upstream (``federation: fx -> NAME:fx``), as a RabbitMQ
    cluster's do. (This held before this test was written.)"""
    n1, n2 = pair
    up = RoostProcess(tmp_path / "upstream", "--node-name", "fed-up@localhost").start()
    try:
        cu, chu = channel(up)
        chu.exchange_declare("fx", "fanout")
        c1, ch1 = channel(n1)
        ch1.exchange_declare("fx", "fanout")
        ch1.queue_declare("fed-in")
        ch1.queue_bind("fed-in", "fx")
        put(n1, "/api/parameters/federation-upstream/%2F/up", {"value": {"uri": up.url}})
        put(n1, "/api/policies/%2F/fed", {
            "pattern": "^fx$", "apply-to": "exchanges",
            "definition": {"federation-upstream": "up"}})  # fmt: skip

        def link_rows() -> list[str]:
            return [
                str(r["node"])
                for n in (n1, n2)
                for r in status(n, "/api/federation-links")[1]
                if r.get("exchange") == "fx" and r["status"] == "running"
            ]

        eventually(lambda: len(link_rows()) >= 1, timeout=15, what=link_rows)

        def bound_upstream() -> bool:  # the link's queue upstream takes what comes now
            return bool(status(up, "/api/exchanges/%2F/fx/bindings/source")[1])

        eventually(bound_upstream)
        chu.confirm_delivery()
        for i in range(3):
            chu.basic_publish("fx", "", b"u%d" % i)

        def arrived() -> int:
            return int(ch1.queue_declare("fed-in", passive=True).method.message_count)

        eventually(lambda: arrived() >= 3, what=arrived)
        ch1.basic_publish("", "fed-in", b"marker")  # behind any second copy
        eventually(lambda: arrived() >= 4, what=arrived)
        bodies = []
        while (got := ch1.basic_get("fed-in", auto_ack=True))[0] is not None:
            bodies.append(got[2])
        assert sorted(bodies) == [b"marker", b"u0", b"u1", b"u2"]
        c1.close()
        cu.close()
    finally:
        up.kill()
