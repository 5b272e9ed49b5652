"""Consumer priorities (the x-priority consumer argument), with pika against a real server.

The expected distribution was recorded from RabbitMQ 3.10.8 with the same calls.
"""

from __future__ import annotations

from tests.features.consumers_support import Recorder, closed_with, connect
from tests.support import RoostProcess, pump, settle


def test_higher_priorities_first_round_robin_among_equals(roost: RoostProcess,
                                                         qname: str) -> None:
    conn = connect(roost)
    pub = conn.channel()
    pub.queue_declare(qname)
    rec = Recorder()
    channels = {}
    for name, priority in (("lo", 0), ("hi1", 10), ("hi2", 10), ("mid", 5)):
        ch = conn.channel()
        ch.basic_qos(prefetch_count=2)
        ch.basic_consume(qname, rec.callback(name), consumer_tag=name,
                         arguments={"x-priority": priority})
        channels[name] = ch
    for i in range(10):
        pub.basic_publish("", qname, str(i).encode())
    assert pump(conn, lambda: rec.total() == 8)
    assert {name: rec.bodies(name) for name in rec.got} == {
        "hi1": ["0", "2"], "hi2": ["1", "3"], "mid": ["4", "5"], "lo": ["6", "7"],
    }
    rec.got.clear()
    # only the lowest consumer has room: it gets what waits, although it is the lowest
    channels["lo"].basic_ack(0, multiple=True)
    assert pump(conn, lambda: rec.total() == 2)
    assert rec.got.keys() == {"lo"}
    rec.got.clear()
    for i in range(10, 12):
        pub.basic_publish("", qname, str(i).encode())
    settle(conn, 0.2)
    assert rec.total() == 0  # every consumer is at its prefetch limit
    channels["hi2"].basic_ack(0, multiple=True)
    channels["lo"].basic_ack(0, multiple=True)
    assert pump(conn, lambda: rec.total() == 2)
    settle(conn, 0.1)
    assert rec.bodies("hi2") == ["10", "11"] and "lo" not in rec.got
    conn.close()


def test_equal_priorities_stay_plain_round_robin(roost: RoostProcess, qname: str) -> None:
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname)
    rec = Recorder()
    for name in ("a", "b", "c"):
        ch.basic_consume(qname, rec.callback(name), auto_ack=True,
                         arguments={"x-priority": 3})
    for i in range(6):
        ch.basic_publish("", qname, str(i).encode())
    assert pump(conn, lambda: rec.total() == 6)
    assert sorted(len(v) for v in rec.got.values()) == [2, 2, 2]
    conn.close()


def test_a_cancelled_high_priority_consumer_lets_lower_ones_receive(
    roost: RoostProcess, qname: str
) -> None:
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname)
    rec = Recorder()
    ch.basic_consume(qname, rec.callback("hi"), auto_ack=True, consumer_tag="hi",
                     arguments={"x-priority": 1})
    ch.basic_consume(qname, rec.callback("lo"), auto_ack=True, consumer_tag="lo")
    ch.basic_publish("", qname, b"1")
    assert pump(conn, lambda: rec.total() == 1) and rec.bodies("hi") == ["1"]
    ch.basic_cancel("hi")
    ch.basic_publish("", qname, b"2")
    assert pump(conn, lambda: rec.total() == 2) and rec.bodies("lo") == ["2"]
    conn.close()


def test_non_integer_priority_is_406(roost: RoostProcess, qname: str) -> None:
    conn = connect(roost)
    conn.channel().queue_declare(qname)
    text = closed_with(406, conn.channel().basic_consume, qname, lambda *a: None,
                       arguments={"x-priority": "5"})
    assert text == (
        f"PRECONDITION_FAILED - invalid arg 'x-priority' for queue '{qname}' in vhost '/': "
        '"expected integer, got longstr"'
    )
    conn.close()
