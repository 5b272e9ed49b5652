"""Priority queues (x-max-priority), with pika and stomp.py against a real server.

Expected orders and error texts were recorded from RabbitMQ 3.10.8 with the same calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pika
import pytest
import stomp

from tests.features.consumers_support import Recorder, closed_with, connect
from tests.stomp.conftest import Inbox
from tests.support import RoostProcess, pump, settle

PERSISTENT = 2


def publish_all(ch: Any, queue: str, priorities: list[int | None], mode: int = 1) -> None:
    for i, p in enumerate(priorities):
        props = pika.BasicProperties(priority=p, delivery_mode=mode)
        ch.basic_publish("", queue, f"{i}:{p}".encode(), props)


def get_all(ch: Any, queue: str, *, ack: bool = True) -> list[str]:
    out = []
    while True:
        method, _props, body = ch.basic_get(queue, auto_ack=ack)
        if method is None:
            return out
        out.append(body.decode())


def test_higher_priority_first_fifo_within_level_capped_at_max(roost: RoostProcess,
                                                               qname: str) -> None:
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname, arguments={"x-max-priority": 5})
    # 9 and 200 count as 5 (the maximum); no priority counts as 0
    publish_all(ch, qname, [None, 3, 9, 5, 0, 1, 3, None, 200])
    assert ch.queue_declare(qname, passive=True).method.message_count == 9
    assert get_all(ch, qname) == [
        "2:9", "3:5", "8:200", "1:3", "6:3", "5:1", "0:None", "4:0", "7:None",
    ]
    conn.close()


def test_requeued_messages_return_to_their_place_in_their_level(roost: RoostProcess,
                                                                 qname: str) -> None:
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname, arguments={"x-max-priority": 3})
    publish_all(ch, qname, [1, 2, 1, 2, None])
    assert get_all(ch, qname, ack=False) == ["1:2", "3:2", "0:1", "2:1", "4:None"]
    ch.basic_recover(requeue=True)
    redelivered = []
    while True:
        method, _props, body = ch.basic_get(qname, auto_ack=True)
        if method is None:
            break
        redelivered.append((body.decode(), method.redelivered))
    assert redelivered == [
        ("1:2", True), ("3:2", True), ("0:1", True), ("2:1", True), ("4:None", True),
    ]
    conn.close()


def test_consumer_with_prefetch_sees_a_late_high_priority_message_first(
    roost: RoostProcess, qname: str
) -> None:
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname, arguments={"x-max-priority": 10})
    publish_all(ch, qname, [1, 1, 1])
    ch.basic_qos(prefetch_count=1)
    rec = Recorder()
    ch.basic_consume(qname, rec.callback("c"))
    assert pump(conn, lambda: rec.total() == 1)
    ch.basic_publish("", qname, b"urgent", pika.BasicProperties(priority=10))
    ch.basic_ack(rec.got["c"][0][2])
    assert pump(conn, lambda: rec.total() == 2)
    assert rec.bodies("c") == ["0:1", "urgent"]
    conn.close()


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (256, "{max_value_exceeded,256}"),
        (-1, "{value_negative,-1}"),
        ("5", '"expected integer, got longstr"'),
        (True, '"expected integer, got bool"'),
    ],
)
def test_invalid_max_priority_is_406(roost: RoostProcess, qname: str, value: Any,
                                     detail: str) -> None:
    conn = connect(roost)
    text = closed_with(406, conn.channel().queue_declare, qname,
                       arguments={"x-max-priority": value})
    assert text == (
        f"PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue '{qname}' "
        f"in vhost '/': {detail}"
    )
    conn.close()


def test_redeclare_with_another_max_priority_is_406(roost: RoostProcess, qname: str) -> None:
    conn = connect(roost)
    conn.channel().queue_declare(qname, arguments={"x-max-priority": 5})
    text = closed_with(406, conn.channel().queue_declare, qname,
                       arguments={"x-max-priority": 6})
    assert "inequivalent arg 'x-max-priority'" in text
    assert "received '6' but current is '5'" in text
    conn.close()


def test_paged_out_high_priority_messages_come_first(roost: RoostProcess, qname: str) -> None:
    """A durable queue keeps only its first 16 MiB of ready bodies in memory: high-priority
    messages published behind a 17.6 MB backlog are paged out, yet delivered first."""
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname, durable=True, arguments={"x-max-priority": 9})
    ch.confirm_delivery()
    low = pika.BasicProperties(priority=1, delivery_mode=PERSISTENT)
    for i in range(1100):
        ch.basic_publish("", qname, f"low{i}".encode().ljust(16_000, b"."), low)
    publish_all(ch, qname, [9, 5, 9], mode=PERSISTENT)
    first = [ch.basic_get(qname, auto_ack=True)[2].decode().rstrip(".") for _ in range(4)]
    assert first == ["0:9", "2:9", "1:5", "low0"]
    assert ch.queue_declare(qname, durable=True, passive=True,
                            arguments={"x-max-priority": 9}).method.message_count == 1099
    ch.queue_delete(qname)
    conn.close()


@pytest.mark.parametrize("kill", [False, True], ids=["graceful stop", "kill -9"])
def test_durable_priority_queue_keeps_its_order_across_restart(
    tmp_path: Path, kill: bool
) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        conn = connect(server)
        ch = conn.channel()
        ch.queue_declare("prio.durable", durable=True, arguments={"x-max-priority": 4})
        ch.confirm_delivery()
        publish_all(ch, "prio.durable", [0, 4, None, 2, 4, 7, 1], mode=PERSISTENT)
        # one delivered and requeued before the restart: it comes back marked redelivered
        ch.basic_get("prio.durable", auto_ack=False)
        conn.close()
        if kill:  # after a round trip on another connection: the close was handled
            connect(server).close()
            server.kill()
        else:
            assert server.stop() == 0
        server.start()
        conn = connect(server)
        ch = conn.channel()
        ok = ch.queue_declare("prio.durable", durable=True, passive=True)
        assert ok.method.message_count == 7
        got = []
        while True:
            method, props, body = ch.basic_get("prio.durable", auto_ack=True)
            if method is None:
                break
            got.append((body.decode(), props.priority, method.redelivered))
        assert got == [
            ("1:4", 4, True), ("4:4", 4, False), ("5:7", 7, False), ("3:2", 2, False),
            ("6:1", 1, False), ("0:0", 0, False), ("2:None", None, False),
        ]
        conn.close()
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


def test_stomp_priority_header_orders_a_priority_queue(roost: RoostProcess, qname: str) -> None:
    """STOMP SEND's ``priority`` header is the AMQP priority (as in RabbitMQ's plugin)."""
    conn = connect(roost)
    conn.channel().queue_declare(qname, arguments={"x-max-priority": 5})
    client = stomp.Connection12([("127.0.0.1", roost.stomp_port)], heartbeats=(0, 0))
    inbox = Inbox()
    client.set_listener("inbox", inbox)
    client.connect("guest", "guest", wait=True)
    try:
        for i, p in enumerate(["1", "5", None, "3"]):
            client.send(f"/amq/queue/{qname}", f"{i}:{p}", headers={"priority": p} if p else {},
                        receipt=f"r{i}")
            assert inbox.receipt() == f"r{i}"
        client.subscribe(f"/amq/queue/{qname}", id="s", ack="client-individual")
        got = [inbox.message() for _ in range(4)]
        assert [f.body for f in got] == ["1:5", "3:3", "0:1", "2:None"]
        for frame in got:
            client.ack(frame.headers["ack"])
        inbox.no_message()
    finally:
        client.disconnect()
    settle(conn, 0.05)
    conn.close()
