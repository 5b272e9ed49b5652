"""Where queues live: ``x-queue-leader-locator: balanced`` puts a new queue on the
running node with the fewest queues (``client-local``, the default, on the declaring
node), and a node that goes down takes its non-durable queues with it, as RabbitMQ 3.10
deletes a down node's transient classic queues (its durable ones wait for it, down)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pika
import pytest

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.management_api import api
from tests.cluster.nodes import channel, etcd_keys, refused
from tests.support import eventually


def test_balanced_queues_spread_over_the_running_nodes(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    try:
        c1, ch1 = channel(n1)
        c2, ch2 = channel(n2)
        balanced = {"x-queue-leader-locator": "balanced"}
        for i in range(4):
            ch1.queue_declare(f"b{i}", durable=True, arguments=balanced)
        local = {"x-queue-leader-locator": "client-local"}
        ch1.queue_declare("local", durable=True, arguments=local)
        ch2.queue_declare("mine", durable=True)  # the default: client-local
        homes = {q["name"]: q["node"] for q in api(n1, "/api/queues")}
        spread = {"b0": "n1", "b1": "n2", "b2": "n1", "b3": "n2"}
        assert homes == {**spread, "local": "n1", "mine": "n2"}
        assert homes == {q["name"]: q["node"] for q in api(n2, "/api/queues")}
        # a queue placed on n2 by n1's client works from both nodes, right away
        ch1.confirm_delivery()
        for i in range(4):
            ch1.basic_publish("", f"b{i}", b"to b%d" % i)
        for i in range(4):
            assert ch2.queue_declare(f"b{i}", passive=True).method.message_count == 1
            _method, _props, body = ch2.basic_get(f"b{i}", auto_ack=True)
            assert body == b"to b%d" % i
        # the queue is n2's own: it is on n2's disk side of etcd and n2 serves it alone
        keys = etcd_keys(shared_etcd, f"{etcd_prefix}/defs/queues/")
        assert keys[f"{etcd_prefix}/defs/queues/%2F/b1"]["node"] == "n2"

        # the policy key (RabbitMQ 3.12's queue-leader-locator), its value checked first
        auth = ("guest", "guest")
        url = n1.http_url + "/api/policies/%2F/"
        bad = httpx.put(url + "spread", auth=auth, json={
            "pattern": "^pol", "definition": {"queue-leader-locator": "nearest"}})  # fmt: skip
        assert bad.status_code == 400
        assert 'is not a valid queue leader locator value' in bad.json()["reason"]
        ok = httpx.put(url + "spread", auth=auth, json={
            "pattern": "^pol", "definition": {"queue-leader-locator": "balanced"}})  # fmt: skip
        assert ok.status_code in (201, 204)
        for i in range(3):  # 3 queues each so far: n1 (the declaring node), n2, n1
            ch1.queue_declare(f"pol{i}", durable=True)
        ch1.queue_declare("pol-here", arguments=local)  # the argument wins over the policy
        homes = {q["name"]: q["node"] for q in api(n2, "/api/queues")}
        placed = [homes[f"pol{i}"] for i in range(3)] + [homes["pol-here"]]
        assert placed == ["n1", "n2", "n1", "n1"]

        # a value RabbitMQ 3.12 does not know: 406, with its words
        for value, why in (("nearest", "invalid_queue_locator_arg"),
                           (5, "{unacceptable_type,signedint}")):  # fmt: skip
            ch = c1.channel()
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
                ch.queue_declare("odd", arguments={"x-queue-leader-locator": value})
            assert exc.value.reply_code == 406
            assert exc.value.reply_text == (
                f"PRECONDITION_FAILED - invalid arg 'x-queue-leader-locator' for queue 'odd' "
                f"in vhost '/': {why}"
            )
        c1.close()
        c2.close()
    finally:
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log


def test_a_down_node_takes_its_transient_queues_with_it(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    ttl = ("--cluster-lease-ttl", "4")  # short, with room for a loaded box
    n1 = node(shared_etcd, tmp_path / "n1", "n1", *ttl, prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", *ttl, prefix=etcd_prefix).start()
    try:
        c2, ch2 = channel(n2)
        ch2.queue_declare("temp", durable=False)
        ch2.queue_declare("keep", durable=True)
        ch2.queue_bind("temp", "amq.fanout")
        c1, ch1 = channel(n1)
        ch1.queue_declare("temp", passive=True)  # seen on n1
        n2.kill()

        def temp_gone() -> bool:
            keys = etcd_keys(shared_etcd, f"{etcd_prefix}/defs/")
            return not any("temp" in k for k in keys)

        assert eventually(temp_gone, timeout=15)
        assert refused(ch1.queue_declare, "temp", passive=True) == 404
        ch1 = c1.channel()
        # the durable one waits for its node, down
        assert refused(ch1.queue_declare, "keep", passive=True) == 404
        ch1 = c1.channel()
        assert {q["name"]: q["state"] for q in api(n1, "/api/queues")} == {"keep": "down"}
        # and the name is free again: declared anew, on n1
        ch1.queue_declare("temp", durable=False)
        assert {q["name"]: q["node"] for q in api(n1, "/api/queues")}["temp"] == "n1"
        c1.close()
        with pytest.raises(pika.exceptions.AMQPError):
            c2.close()
    finally:
        n1.kill()
        n2.kill()
    assert "Traceback" not in n1.log, n1.log
