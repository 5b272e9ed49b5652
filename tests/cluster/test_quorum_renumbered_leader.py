"""A quorum queue's old leader that wins again from its own disk numbers its messages
afresh from 1 (``QueueBase.restore``), so a number acked before names another message
now. A node that relays the queue to its clients remembers their acks by number
(``cluster/quorum/standin.py``) and acks the new leader's redeliveries of those numbers
unseen; it must not take a renumbered message for one its client acked. On 3 real
nodes and a real etcd, judged by the history checker:

- p:0..p:2 confirmed, taken and acked by a consumer on n3 (its node's stand-in remembers
  the acks by number: 1..3); then p:3..p:5 confirmed, taken by a consumer on the leader
  n1 that never acks them (its node dies with it);
- p:6 confirmed after that, so n1's disk holds the acks and the delivered marks;
- n1 and n2 killed (-9), n1 started again: with n3 it is a majority and it leads again
  from its disk, its messages p:3..p:6 numbered 1..4, p:3..p:5 marked redelivered;
- a consumer on n3 again (its stand-in subscribes at n1 again) must get p:3..p:6. Before
  the fix n3 acked p:3..p:5 to n1 unseen (numbers 1..3 were in its memory): three
  confirmed messages lost.

The deliveries to n1's consumer are not recorded: that client died unacked with its node,
so a message only it got counts as not delivered."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.history import History
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.quorum_queues import QUORUM, own_leader
from tests.cluster.test_quorum_full_restart import consume_rest
from tests.confirming import publish_recorded
from tests.support import RoostProcess, eventually


def _publish(server: RoostProcess, h: History, seqs: range) -> None:
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for seq in seqs:
            publish_recorded(ch, h, "p", "qq", seq, 64)
    assert {("p", s) for s in seqs} <= h.confirmed


def test_a_leader_back_from_its_disk_with_new_numbers_loses_nothing_confirmed(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    h = History()
    local: pika.BlockingConnection | None = None
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("qq", durable=True, arguments=QUORUM)
        eventually(lambda: own_leader(n1, "qq") == "n1", 30, "n1 does not lead qq")
        eventually(lambda: len(queue_json(n1, "qq")["online"]) == 3, 30)  # type: ignore[arg-type]
        _publish(n1, h, range(3))
        with pika.BlockingConnection(pika.URLParameters(n3.url)) as relayed:
            rch = relayed.channel()
            for _ in range(3):
                method, _p, raw = next(rch.consume("qq"))
                rch.basic_ack(method.delivery_tag)
                h.ack(h.deliver("qq", raw, method.redelivered))
            rch.cancel()
        assert h.acked == {("p", 0), ("p", 1), ("p", 2)}
        # n1 has the acks and n3's subscription is gone (what it sends goes to n1's own)
        eventually(lambda: queue_json(n1, "qq").get("messages") == 0, 30)
        eventually(lambda: queue_json(n1, "qq").get("consumers") == 0, 30)

        _publish(n1, h, range(3, 6))
        local = pika.BlockingConnection(pika.URLParameters(n1.url))  # dies with n1
        lch = local.channel()
        lch.basic_qos(prefetch_count=3)
        held = []
        for _method, _p, raw in lch.consume("qq"):
            held.append(raw)
            if len(held) == 3:
                break
        assert sorted(held) == [f"p:{s}:".encode().ljust(64, b".") for s in (3, 4, 5)]
        # a later confirm's commit covers the acks and the delivered marks on n1's disk
        _publish(n1, h, range(6, 7))

        n1.kill()
        n2.kill()
        n1.start()  # with n3 a majority: it leads again from its own disk
        eventually(lambda: own_leader(n3, "qq") == "n1", 60, "n1 does not lead qq again")
        n2.start()

        consume_rest(n3, "qq", h)  # a consumer on n3 again: its stand-in subscribes
        redelivered = sorted(m for _q, m, r in h.deliveries if r)
        assert h.problems() == [], (h.problems(), redelivered)
        assert h.confirmed <= h.acked, sorted(h.confirmed - h.acked)
        # what n1's consumer held came back, marked redelivered
        assert {("p", 3), ("p", 4), ("p", 5)} <= set(redelivered), redelivered
    finally:
        for n in nodes:
            n.kill()
        if local is not None:  # its node is gone: the socket only
            with contextlib.suppress(Exception):
                local.close()
    for n in nodes:
        assert "Traceback" not in n.log, n.log
