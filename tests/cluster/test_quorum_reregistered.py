"""A member whose etcd lease expired during a pause and which registered again (under
load; SIGSTOP here) serves a replicated queue as before: its link with the node that
dials it settles (it went down and up every 50 ms for good), so publishes through it are
confirmed, not nacked, and the history checker finds every confirmed message delivered.

n2 applies the cluster's definition changes 1 s late (``ROOST_TEST_DEFINITIONS_LAG``, a
test-only knob): the declare-ok on n1 waits for it, so the publishes through n2 right
after it reach the queue. On the old code the churning link let the declare-ok go while
n2 did not know the queue yet, and n2 confirmed its publishes as unroutable: lost (1632
confirmed messages once, in the paused-leader test, n2 having re-registered at startup)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.history import History, body
from tests.cluster.nodes import TTL
from tests.cluster.quorum_queues import QUORUM


def test_a_member_registered_again_keeps_its_link_and_confirms_what_it_delivers(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2, n3 = [
        node(shared_etcd, tmp_path / f"n{i}", f"n{i}", *TTL, prefix=etcd_prefix) for i in (1, 2, 3)
    ]
    n2.env["ROOST_TEST_DEFINITIONS_LAG"] = "1.0"
    for n in (n1, n2, n3):
        n.start()
    for other in ("n2", "n3"):
        n1.wait_for_log(f"link with {other} up")
    n2.wait_for_log("link with n3 up")
    try:
        assert n2.proc is not None
        os.kill(n2.proc.pid, signal.SIGSTOP)  # past its lease (2 s): the others drop it
        n1.wait_for_log("node 'n2' is down")
        os.kill(n2.proc.pid, signal.SIGCONT)
        n2.wait_for_log("registered again as 'n2'")
        n1.wait_for_log("node 'n2' is up", timeout=5)
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("rr", durable=True, arguments=QUORUM)
        h = History()
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as conn:  # a member
            ch = conn.channel()
            ch.confirm_delivery()
            for i in range(300):
                h.publish(("p", i), "rr")
                try:
                    ch.basic_publish("", "rr", body("p", i, 64))
                    h.confirm(("p", i))
                except pika.exceptions.NackError:
                    h.confirm(("p", i), ok=False)
        with pika.BlockingConnection(pika.URLParameters(n3.url)) as conn:
            ch = conn.channel()
            for method, _p, raw in ch.consume("rr", inactivity_timeout=3):
                if method is None:
                    break
                h.ack(h.deliver("c", raw, method.redelivered))
                ch.basic_ack(method.delivery_tag)
        assert len(h.confirmed) == 300, f"{300 - len(h.confirmed)} of 300 nacked"
        assert h.problems() == [], h.problems()
        replaced = n1.log.count("link with n2 down (replaced by a new connection)")
        assert replaced == 0, f"the link with n2 was replaced {replaced} times"
    finally:
        for n in (n1, n2, n3):
            n.kill()
