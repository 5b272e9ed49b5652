"""kill -9 of etcd while a 3-node quorum queue runs under load: the members keep moving
messages (publishes confirmed at a majority, deliveries, acks) while etcd is out of reach,
a definition change fails with a clear error, and once etcd is back a declare works
again and a kill -9 of the leader still fails over. The history checker decides."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pika
import pytest

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.history import History
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.quorum_queues import QUORUM, consumer, publisher, wind_down
from tests.support import eventually


def test_etcd_killed_under_a_quorum_run_loses_nothing_and_reconciles(
    etcd: EtcdServer, tmp_path: Path
) -> None:
    n1, n2, n3 = three_nodes(etcd, "/c", tmp_path)
    h = History()
    stop, hold, killed = threading.Event(), threading.Event(), threading.Event()
    stop_publishing = threading.Event()
    times: list[tuple[float, float]] = []
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("work", durable=True, arguments=QUORUM)
        threads = [
            threading.Thread(target=publisher, args=(n2, "p", "work", h, stop_publishing, times)),
            threading.Thread(target=publisher, args=(n1, "q", "work", h, stop_publishing, [])),
            threading.Thread(target=consumer, args=(n3, "work", h, stop, hold, killed, [])),
        ]
        for t in threads:
            t.start()
        eventually(lambda: len(h.acked) > 200, 30, "publishing never got going")
        etcd.kill()  # kill -9
        down = len(h.confirmed), len(h.acked)
        eventually(lambda: len(h.confirmed) > down[0] + 300, 20, "no confirms without etcd")
        eventually(lambda: len(h.acked) > down[1] + 300, 20, "no deliveries without etcd")
        # a definition change needs etcd: refused with a clear error, the rest goes on
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as conn:
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
                conn.channel().queue_declare("new", durable=True, arguments=QUORUM)
            code, text = refused.value.args
            assert code == 541 and "cluster could not record" in text and "etcd" in text, text
        assert not stop_publishing.is_set() and all(t.is_alive() for t in threads)
        time.sleep(3)  # past the nodes' lease TTL (2 s): nobody may act on it alone
        # every node is fenced (cluster/quorum/fence.py), so none can elect another
        # leader: the leader, its members fenced with it, goes on serving
        past = len(h.confirmed), len(h.acked)
        eventually(lambda: len(h.confirmed) > past[0] + 100, 20, "no confirms past the TTL")
        eventually(lambda: len(h.acked) > past[1] + 100, 20, "no deliveries past the TTL")
        assert "hands out and confirms nothing here" in n1.log  # it was fenced
        etcd.start()
        back = len(h.confirmed)
        eventually(lambda: len(h.confirmed) > back + 200, 30, "no confirms after etcd returned")

        def declared() -> bool:
            with (
                contextlib.suppress(pika.exceptions.AMQPError),
                pika.BlockingConnection(pika.URLParameters(n2.url)) as conn,
            ):
                conn.channel().queue_declare("new", durable=True, arguments=QUORUM)
                return True
            return False

        eventually(declared, 20, "declares still refused after etcd returned")
        shown = queue_json(n2, "work")
        assert shown["leader"] == "n1" and sorted(shown["members"]) == ["n1", "n2", "n3"]  # type: ignore[arg-type]
        # reconciled: a kill -9 of the leader now fails over as usual
        hold.set()
        time.sleep(0.5)
        n1.kill()
        killed.set()
        after = len(h.confirmed)
        eventually(lambda: len(h.confirmed) > after + 200, 30, "no failover after etcd returned")
        wind_down(h, threads[:2], threads[2], stop, stop_publishing)
        assert h.problems() == [], h.problems()
    finally:
        stop.set()
        stop_publishing.set()
        for n in (n1, n2, n3):
            n.kill()
    for n in (n2, n3):
        assert "Traceback" not in n.log, n.log
