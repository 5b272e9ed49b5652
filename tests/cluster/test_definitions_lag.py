"""A node far behind on the cluster's definitions never confirms a publish it routes by
its old bindings and drops.

A declare-ok waits for every running node to apply the change, capped at 2 s
(``cluster/applied.py``). n2 here applies every definition change 3 s late
(``ROOST_TEST_DEFINITIONS_LAG``, a test-only knob), so n1's declare-ok goes out while n2
does not know the queue yet. Publishes through n2 right after it: n2 has heard from n1
that n1 applied a newer revision than its own, so a publish it routes nowhere is nacked,
not confirmed as unroutable; the publisher republishes, and once n2 has caught up its
publishes reach the queue. The history checker finds every confirmed message delivered.
The old code confirmed them all as unroutable: every one lost."""

from __future__ import annotations

import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.history import History, body
from tests.cluster.nodes import TTL
from tests.cluster.quorum_queues import QUORUM


def test_a_node_behind_on_definitions_nacks_what_it_cannot_route(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2 = [
        node(shared_etcd, tmp_path / f"n{i}", f"n{i}", *TTL, prefix=etcd_prefix) for i in (1, 2)
    ]
    n2.env["ROOST_TEST_DEFINITIONS_LAG"] = "3.0"  # past the declare-ok's 2 s wait
    for n in (n1, n2):
        n.start()
    n1.wait_for_log("link with n2 up")
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("lag", durable=True, arguments=QUORUM)
        h = History()
        nacked = 0
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for i in range(200):
                deadline = time.monotonic() + 30
                while True:  # a nacked publish is republished (under the same id)
                    h.publish(("p", i), "lag")
                    try:
                        ch.basic_publish("", "lag", body("p", i, 64))
                    except pika.exceptions.NackError:
                        h.confirm(("p", i), ok=False)
                        nacked += 1
                        assert time.monotonic() < deadline, "n2 never caught up"
                        time.sleep(0.02)
                        continue
                    h.confirm(("p", i))
                    break
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            for method, _p, raw in ch.consume("lag", inactivity_timeout=3):
                if method is None:
                    break
                h.ack(h.deliver("c", raw, method.redelivered))
                ch.basic_ack(method.delivery_tag)
                if h.confirmed <= {m for _q, m, _r in h.deliveries}:
                    break
        assert len(h.confirmed) == 200
        assert h.problems() == [], h.problems()
        assert nacked > 0, "n2 was never behind: the test proves nothing"
        assert "did not apply revision" in n1.log  # the declare-ok did not wait for n2
    finally:
        for n in (n1, n2):
            n.kill()
