"""A quorum queue's leader on a node cut off from etcd, and only from etcd (its clients
and the other members still reach it), fences itself: once its lease has gone
unrenewed for the TTL less a margin it hands out nothing more to the consumers on its
own node, before the members can see its election key expire and elect one of them,
which then hands out the same backlog. Unfenced, the old leader's consumer and the new
leader's consumer would work through the same messages at once: delivered twice, an
acked one delivered again unflagged, out of order. The history checker decides.

The cut: n1 reaches etcd through a forwarder of its own (``tcp_proxy.py``), stopped with
SIGSTOP (requests hang, nothing closed) and continued with SIGCONT; n1 then registers
again under a new lease and its queue follows the new leader."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.history import History, body
from tests.cluster.nodes import queue_json
from tests.cluster.quorum_queues import QUORUM, checked, own_leader, publisher, wind_down
from tests.cluster.tcp_proxy import Proxy
from tests.support import RoostProcess, eventually, free_port

TTL = ("--cluster-lease-ttl", "2")
BACKLOG = 3000  # at ~2 x 150 msg/s, the consumers are busy through the whole cut


def slow_consumer(
    server: RoostProcess, name: str, h: History, stop: threading.Event, fast: threading.Event
) -> None:
    """Acks each delivery, a few ms apart until ``fast`` is set, so a backlog lasts."""
    while not stop.is_set():
        try:
            with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
                ch = conn.channel()
                ch.basic_qos(prefetch_count=10)
                for method, _props, raw in ch.consume("work", inactivity_timeout=0.1):
                    if method is None:
                        if stop.is_set():
                            return
                        continue
                    msg = h.deliver(name, raw, method.redelivered)
                    ch.basic_ack(method.delivery_tag)
                    h.ack(msg)
                    if not fast.is_set():
                        conn.sleep(0.006)
        except pika.exceptions.AMQPError:  # the queue moved under it: consume again
            stop.wait(0.2)


def test_a_leader_cut_off_from_etcd_hands_nothing_out_before_another_leads(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    proxy = Proxy(shared_etcd.host, shared_etcd.client_port)
    n1 = RoostProcess(
        tmp_path / "n1", "--cluster", f"etcd://127.0.0.1:{proxy.port}{etcd_prefix}",
        "--node-name", "n1", "--cluster-port", str(free_port()), *TTL,
    )  # fmt: skip
    nodes = [n1]
    h = History()
    stop, fast, stop_publishing = threading.Event(), threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    try:
        n1.start()
        for name in ("n2", "n3"):
            nodes.append(node(shared_etcd, tmp_path / name, name, *TTL, prefix=etcd_prefix))
            nodes[-1].start()
        _n1, n2, n3 = nodes
        for other in ("n2", "n3"):
            n1.wait_for_log(f"node '{other}' is up")
            n1.wait_for_log(f"link with {other} up")
        n2.wait_for_log("link with n3 up")
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("work", durable=True, arguments=QUORUM)
            ch.tx_select()  # the backlog in one commit: commit-ok once a majority holds it
            for n in range(BACKLOG):
                h.publish(("b", n), "work")
                ch.basic_publish("", "work", body("b", n, 64))
            ch.tx_commit()
            for n in range(BACKLOG):
                h.confirm(("b", n))
        threads = [
            threading.Thread(target=publisher, args=(n2, "p", "work", h, stop_publishing, [])),
            threading.Thread(target=slow_consumer, args=(n1, "on-n1", h, stop, fast)),
            threading.Thread(target=slow_consumer, args=(n3, "on-n3", h, stop, fast)),
        ]
        for t in threads:
            t.start()
        eventually(lambda: len(h.acked) > 200, 30, "consuming never got going")

        os.kill(proxy.process.pid, signal.SIGSTOP)  # n1 no longer reaches etcd
        cut_at = time.monotonic()
        eventually(lambda: own_leader(n3, "work") in ("n2", "n3"), 30, "no failover")
        new_leader = str(own_leader(n3, "work"))
        print(f"\nnew leader {new_leader} seen {time.monotonic() - cut_at:.1f} s after the cut")
        on_n3 = sum(1 for q, _m, _r in h.deliveries if q == "on-n3")
        # long enough for both consumers to work through the backlog side by side, were
        # the old leader still handing it out
        eventually(
            lambda: sum(1 for q, _m, _r in h.deliveries if q == "on-n3") > on_n3 + 150,
            30,
            "the new leader delivers nothing",
        )
        os.kill(proxy.process.pid, signal.SIGCONT)  # healed: n1 registers again
        n1.wait_for_log("registered again as 'n1'", 30)
        fast.set()
        eventually(lambda: own_leader(n1, "work") == new_leader, 30, "n1 never followed")
        after = len(h.confirmed)
        eventually(lambda: len(h.confirmed) > after + 50, 30, "stalled after the heal")
        wind_down(h, threads[:1], threads[1], stop, stop_publishing)
        threads[2].join(20)
        leaders = {str(queue_json(n, "work")["leader"]) for n in nodes}
        assert leaders == {new_leader}
        checked(h)  # an acked message may come again only flagged redelivered
        assert "hands out and confirms nothing here" in n1.log
    finally:
        stop.set()
        stop_publishing.set()
        for t in threads:
            t.join(20)
        os.kill(proxy.process.pid, signal.SIGCONT)
        for n in nodes:
            n.kill()
        proxy.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log
