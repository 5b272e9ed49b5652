"""Quorum queue members restarted after kill -9, on 3 real nodes and a real etcd, judged
by the history checker (every confirmed message delivered, nothing acked delivered
again, first deliveries in publish order):

- all three nodes killed mid-stream and started again: the queue comes back whole;
- the leader and a follower killed and started again, then the third killed before
  they could catch up from it: the old leader serves its own disk's copy;
- the leader and a follower killed, only the follower started again: with the one
  member that never stopped it is a majority, so the queue must get a leader and serve
  everything confirmed while the old leader stays down;
- the leader killed, its successor confirming more and killed too, the old leader
  started again: it and the survivor are a majority and must elect a leader that
  serves everything (the survivor's copy).

The last two failed before issue 22 was fixed (no leader): a restarted member dropped
its copy and wrote no position, so the survivor never saw a majority's. Now a restarted
follower keeps its copy and position (its member record), and an old leader that
another member succeeded writes a position bounding its log (and never campaigns)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.history import History
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.quorum_queues import QUORUM
from tests.confirming import publish_recorded
from tests.support import RoostProcess, eventually

CONFIRMED_BEFORE_KILL = 2000


def publisher(server: RoostProcess, queue: str, h: History, stop: threading.Event) -> None:
    publisher_named(server, queue, h, stop, "p")


def publisher_named(
    server: RoostProcess, queue: str, h: History, stop: threading.Event, name: str
) -> None:
    """Publishes (confirmed, persistent) until ``stop`` or its node dies."""
    try:
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            seq = 0
            while not stop.is_set():
                publish_recorded(ch, h, name, queue, seq, 128)
                seq += 1
    except pika.exceptions.AMQPError:
        pass  # its node was killed: what it had confirmed is what counts


def consume_acked(server: RoostProcess, queue: str, h: History, count: int) -> None:
    """``count`` messages, each acked and recorded; the connection closes after the last
    ack, so the broker has had every one of them."""
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1)  # nothing left unacked behind the last one
        for taken, (method, _p, raw) in enumerate(ch.consume(queue), 1):
            ch.basic_ack(method.delivery_tag)
            h.ack(h.deliver(queue, raw, method.redelivered))
            if taken == count:
                break
        ch.cancel()


def consume_rest(server: RoostProcess, queue: str, h: History, timeout: float = 60) -> None:
    """Everything left, acked, until each confirmed message was delivered and the queue
    stays quiet; a 404 or a lost connection (no leader yet) is tried again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
                ch = conn.channel()
                for method, _p, raw in ch.consume(queue, inactivity_timeout=2):
                    if method is None:
                        delivered = {m for _q, m, _r in h.deliveries}
                        if h.confirmed <= delivered or time.monotonic() > deadline:
                            return
                        continue
                    ch.basic_ack(method.delivery_tag)
                    h.ack(h.deliver(queue, raw, method.redelivered))
        except pika.exceptions.AMQPError:
            time.sleep(0.2)


def publish_then_ack_some(n1: RoostProcess, h: History, stop: threading.Event) -> threading.Thread:
    """A publisher on the leader n1 with 2,000 confirmed, 500 of them consumed and acked
    on n2, and publishing going on (so a later confirm covers those acks): returned
    still publishing."""
    with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
        conn.channel().queue_declare("qq", durable=True, arguments=QUORUM)
    t = threading.Thread(target=publisher, args=(n1, "qq", h, stop))
    t.start()
    eventually(lambda: len(h.confirmed) >= CONFIRMED_BEFORE_KILL, 120, "publishing stalled")
    return t


def acks_then_more_confirmed(n: RoostProcess, h: History) -> None:
    """500 consumed and acked, then more confirms after the last ack: records behind
    those acks in the leader's log are committed, so are the acks."""
    consume_acked(n, "qq", h, 500)
    after = len(h.confirmed)
    eventually(lambda: len(h.confirmed) >= after + 50, 60, "no confirms after the acks")


def test_all_three_members_killed_and_restarted_lose_nothing_confirmed(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    h, stop = History(), threading.Event()
    try:
        t = publish_then_ack_some(n1, h, stop)
        assert sorted(queue_json(n1, "qq")["members"]) == ["n1", "n2", "n3"]  # type: ignore[arg-type]
        acks_then_more_confirmed(n2, h)
        for n in (n1, n2, n3):  # kill -9, mid-stream
            n.kill()
        stop.set()
        t.join(30)
        for n in nodes:
            n.start()
        consume_rest(n3, "qq", h)
        assert h.problems() == [], h.problems()
        print(f"\n{len(h.confirmed)} confirmed, {len(h.acked)} acked in all")
    finally:
        stop.set()
        for n in nodes:
            n.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def test_leader_and_follower_restarted_then_the_third_killed_lose_nothing_confirmed(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    h, stop = History(), threading.Event()
    try:
        t = publish_then_ack_some(n1, h, stop)
        acks_then_more_confirmed(n3, h)
        n1.kill()  # the leader and a follower
        n2.kill()
        stop.set()
        t.join(30)
        n1.start()
        n2.start()
        n3.kill()  # the one member that kept running, before anyone caught up from it
        consume_rest(n2, "qq", h)
        assert h.problems() == [], h.problems()
    finally:
        stop.set()
        for n in nodes:
            n.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def test_a_restarted_follower_and_a_survivor_elect_a_leader_without_the_old_one(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    h, stop = History(), threading.Event()
    try:
        t = publish_then_ack_some(n1, h, stop)
        acks_then_more_confirmed(n3, h)
        n1.kill()  # the leader and a follower, together
        n2.kill()
        stop.set()
        t.join(30)
        n2.start()  # n1 stays down: n2 and n3 are a majority of three
        eventually(
            lambda: queue_json(n3, "qq")["leader"] in ("n2", "n3"),
            30,  # a failover takes TTL + FALLBACK, well within this on a loaded box
            lambda: f"no leader among n2, n3: {queue_json(n3, 'qq')}",
        )
        consume_rest(n3, "qq", h)
        assert h.problems() == [], h.problems()
        assert "member copy kept" in n2.log, n2.log  # its copy, not a snapshot, counted
    finally:
        stop.set()
        for n in nodes:
            n.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def test_the_old_leader_restarted_after_its_successor_died_loses_nothing_confirmed(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    n1, n2, n3 = nodes
    h, stop = History(), threading.Event()
    try:
        t = publish_then_ack_some(n1, h, stop)
        n1.kill()
        stop.set()
        t.join(30)
        successor = eventually(
            lambda: (leader := queue_json(n2, "qq")["leader"]) in ("n2", "n3") and leader, 30
        )
        name = "n3" if successor == "n2" else "n2"
        survivor = n3 if successor == "n2" else n2
        # more confirmed under the successor's term only (published through the survivor)
        stop2 = threading.Event()
        t2 = threading.Thread(target=publisher_named, args=(survivor, "qq", h, stop2, "q"))
        t2.start()
        eventually(lambda: sum(1 for p, _ in h.confirmed if p == "q") >= 300, 60)
        stop2.set()
        t2.join(30)
        (n2 if successor == "n2" else n3).kill()
        n1.start()  # n1 and the survivor are a majority; only the survivor has it all
        eventually(
            lambda: queue_json(survivor, "qq")["leader"] in ("n1", name),
            30,
            lambda: f"no leader among n1 and the survivor: {queue_json(survivor, 'qq')}",
        )
        consume_rest(survivor, "qq", h)
        assert h.problems() == [], h.problems()
        assert "a member again" in n1.log, n1.log  # it voted, bounded, and never ran
    finally:
        stop.set()
        for n in nodes:
            n.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log
