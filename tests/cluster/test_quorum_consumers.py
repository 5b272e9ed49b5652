"""A replicated quorum queue's consumers stay through a change of leader, as RabbitMQ
keeps them: a consumer connected to the node that led the queue is fed by the new
leader, with no basic.cancel (3 real nodes and a real etcd)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.quorum_queues import QUORUM, ctl, publish


def test_a_consumer_on_the_old_leaders_node_stays_through_a_leader_change(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    stack = contextlib.ExitStack()
    try:
        conn = pika.BlockingConnection(pika.URLParameters(n1.url))
        stack.callback(lambda: conn.is_open and conn.close())
        ch = conn.channel()
        ch.queue_declare("keep", durable=True, arguments=QUORUM)  # led by n1
        cancelled: list[str] = []
        ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        got: list[bytes] = []

        def take(_ch: object, method: object, _props: object, body: bytes) -> None:
            got.append(body)
            ch.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]

        ch.basic_qos(prefetch_count=10)
        ch.basic_consume("keep", take)
        publish(n2, "keep", [b"a%d" % i for i in range(5)])
        deadline = time.monotonic() + 10
        while len(got) < 5 and time.monotonic() < deadline:
            conn.process_data_events(0.1)
        assert got == [b"a%d" % i for i in range(5)]
        ctl(n2, "queues", "delete-member", "keep", "n1")  # n1 hands the lead over
        deadline = time.monotonic() + 15
        while queue_json(n1, "keep")["leader"] == "n1" and time.monotonic() < deadline:
            conn.process_data_events(0.1)
        assert queue_json(n1, "keep")["leader"] in ("n2", "n3")
        publish(n2, "keep", [b"b%d" % i for i in range(5)])
        deadline = time.monotonic() + 15
        while len(got) < 10 and time.monotonic() < deadline:
            conn.process_data_events(0.1)
        assert cancelled == []
        assert got == [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]
    finally:
        stack.close()
        for n in (n1, n2, n3):
            n.kill()
    for n in (n1, n2, n3):
        assert "Traceback" not in n.log, n.log
