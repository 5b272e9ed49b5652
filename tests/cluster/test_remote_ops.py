"""Operations on a queue homed on another node answer as the home node would: declare-ok
counts, basic.get (with ack and requeue) and purge go to the home node and back."""

from __future__ import annotations

from pathlib import Path

import httpx
import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.nodes import channel


def test_get_purge_and_counts_of_a_queue_homed_on_the_other_node(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    try:
        c1, ch1 = channel(n1)
        c2, ch2 = channel(n2)
        ch1.queue_declare("far", durable=True)
        ch1.confirm_delivery()
        for i in range(6):
            ch1.basic_publish("", "far", b"m%d" % i, pika.BasicProperties(delivery_mode=2))
        ch1b = c1.channel()
        ch1b.basic_qos(prefetch_count=1)
        ch1b.basic_consume("far", lambda *a: None)  # holds m0 unacked on n1
        c1.process_data_events(0.3)

        ok = ch2.queue_declare("far", passive=True).method
        assert (ok.message_count, ok.consumer_count) == (5, 1)  # the home node's figures
        ok = ch2.queue_declare("far", durable=True).method  # a redeclare answers them too
        assert (ok.message_count, ok.consumer_count) == (5, 1)

        method, _props, body = ch2.basic_get("far")
        assert body == b"m1" and method.message_count == 4
        ch2.basic_reject(method.delivery_tag, requeue=True)  # back at home, in its place
        method, _props, body = ch2.basic_get("far")
        assert body == b"m1" and method.redelivered
        ch2.basic_ack(method.delivery_tag)
        method, _props, body = ch2.basic_get("far", auto_ack=True)
        assert body == b"m2" and method.message_count == 3
        assert ch2.queue_declare("far", passive=True).method.message_count == 3
        assert ch1.queue_declare("far", passive=True).method.message_count == 3
        # the management API's "get messages" on n2 takes them from n1
        got = httpx.post(
            f"{n2.http_url}/api/queues/%2F/far/get",
            json={"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"},
            auth=("guest", "guest"),
        )
        assert got.status_code == 200 and [m["payload"] for m in got.json()] == ["m3"]
        assert ch2.queue_declare("far", passive=True).method.message_count == 2

        for i in range(3):  # published after n2 last heard the home's count (2)
            ch1.basic_publish("", "far", b"late%d" % i, pika.BasicProperties(delivery_mode=2))
        assert ch2.queue_purge("far").method.message_count == 5  # the home node's count
        assert ch1.queue_declare("far", passive=True).method.message_count == 0
        assert ch2.basic_get("far") == (None, None, None)
        c1.close()
        c2.close()
    finally:
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log


def test_messages_sharing_headers_across_the_hop_keep_their_own(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    """The receiving node decodes a sender's repeated property bytes once, headers
    included, so messages share one headers table: dead-lettering one of them (x-death
    added) must leave the others' headers as they were published."""
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    try:
        c1, ch1 = channel(n1)
        c2, ch2 = channel(n2)
        ch1.queue_declare("dead")
        ch1.queue_declare("src", arguments={"x-dead-letter-exchange": "",
                                            "x-dead-letter-routing-key": "dead"})  # fmt: skip
        ch2.confirm_delivery()
        props = pika.BasicProperties(headers={"k": "v", "n": 1})
        for i in range(3):
            ch2.basic_publish("", "src", b"m%d" % i, props)
        method, got, body = ch2.basic_get("src")
        assert body == b"m0" and got.headers == {"k": "v", "n": 1}
        ch2.basic_reject(method.delivery_tag, requeue=False)  # dead-lettered on n1
        method, got, body = ch2.basic_get("dead", auto_ack=True)
        assert body == b"m0" and got.headers["x-death"][0]["queue"] == "src"
        for expected, ch in ((b"m1", ch2), (b"m2", ch1)):  # relayed by n2; at home on n1
            method, got, body = ch.basic_get("src", auto_ack=True)
            assert body == expected and got.headers == {"k": "v", "n": 1}, got.headers
        c1.close()
        c2.close()
    finally:
        n1.kill()
        n2.kill()
