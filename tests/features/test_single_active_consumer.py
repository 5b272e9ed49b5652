"""x-single-active-consumer and exclusive consumers, with pika (and httpx for the
management API's ``active`` flag) against a real server.

Checked against RabbitMQ 3.10.8: the first registered consumer is the active one (consumer
priorities do not change that), exclusive consumers are refused on such a queue, and a
non-boolean argument is a 406. One difference: when the active consumer is cancelled,
RabbitMQ 3.10 marks the next one active but delivers to it only at the next queue event
(a publish or a requeue); Roost delivers to it at once.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.features.consumers_support import Recorder, closed_with, connect
from tests.support import RoostProcess, pump, settle

SAC = {"x-single-active-consumer": True}


def test_only_the_first_consumer_receives_and_the_next_takes_over_on_cancel(
    roost: RoostProcess, qname: str
) -> None:
    conn = connect(roost)
    pub = conn.channel()
    pub.queue_declare(qname, arguments=SAC)
    rec = Recorder()
    channels = {}
    for name, priority in (("A", 0), ("B", 10), ("C", 5)):  # priorities do not matter here
        ch = conn.channel()
        ch.basic_qos(prefetch_count=2)
        ch.basic_consume(qname, rec.callback(name), consumer_tag=name,
                         arguments={"x-priority": priority})
        channels[name] = ch
    for i in range(6):
        pub.basic_publish("", qname, str(i).encode())
    assert pump(conn, lambda: rec.total() == 2)
    settle(conn, 0.2)
    assert rec.got == {"A": [("0", False, 1), ("1", False, 2)]}  # A's prefetch: the rest wait
    channels["A"].basic_cancel("A")
    assert pump(conn, lambda: len(rec.bodies("B")) == 2)
    assert rec.bodies("B") == ["2", "3"]
    channels["A"].close()  # A's unacked messages go back, ahead of the rest, to B
    channels["B"].basic_ack(0, multiple=True)
    assert pump(conn, lambda: len(rec.bodies("B")) == 4)
    assert [(b, r) for b, r, _ in rec.got["B"][2:]] == [("0", True), ("1", True)]
    settle(conn, 0.2)
    assert "C" not in rec.got
    conn.close()


def test_the_next_consumer_takes_over_when_the_active_ones_connection_dies(
    roost: RoostProcess, qname: str
) -> None:
    first = connect(roost)
    ch = first.channel()
    ch.queue_declare(qname, arguments=SAC)
    rec_first = Recorder()
    ch.basic_consume(qname, rec_first.callback("first"))
    second = connect(roost)
    rec = Recorder()
    second.channel().basic_consume(qname, rec.callback("second"))
    for i in range(3):
        ch.basic_publish("", qname, str(i).encode())
    assert pump(first, lambda: rec_first.total() == 3)
    settle(second, 0.2)
    assert rec.total() == 0
    first.close()  # unacked: requeued, and the second consumer is now the active one
    assert pump(second, lambda: rec.total() == 3)
    assert [(b, r) for b, r, _ in rec.got["second"]] == [("0", True), ("1", True), ("2", True)]
    second.close()


def test_management_api_shows_which_consumer_is_active(roost: RoostProcess, qname: str) -> None:
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname, arguments=SAC)
    ch.basic_consume(qname, lambda *a: None, consumer_tag="one")
    conn.channel().basic_consume(qname, lambda *a: None, consumer_tag="two")

    def consumers() -> dict[str, Any]:
        with httpx.Client(base_url=roost.http_url, auth=("guest", "guest")) as http:
            listed = http.get("/api/consumers/%2F").json()
        return {c["consumer_tag"]: c for c in listed if c["queue"]["name"] == qname}

    shown = consumers()
    assert (shown["one"]["active"], shown["one"]["activity_status"]) == (True, "single_active")
    assert (shown["two"]["active"], shown["two"]["activity_status"]) == (False, "waiting")
    ch.basic_cancel("one")
    shown = consumers()
    assert list(shown) == ["two"] and shown["two"]["active"] is True
    conn.close()


def test_exclusive_consume_is_refused_on_a_single_active_consumer_queue(
    roost: RoostProcess, qname: str
) -> None:
    conn = connect(roost)
    conn.channel().queue_declare(qname, arguments=SAC)
    text = closed_with(403, conn.channel().basic_consume, qname, lambda *a: None,
                       exclusive=True)
    assert text == f"ACCESS_REFUSED - queue '{qname}' in vhost '/' in exclusive use"
    conn.close()


def test_exclusive_consumer_refuses_others_403(roost: RoostProcess, qname: str) -> None:
    conn = connect(roost)
    ch = conn.channel()
    ch.queue_declare(qname)
    ch.basic_consume(qname, lambda *a: None, exclusive=True)
    text = closed_with(403, conn.channel().basic_consume, qname, lambda *a: None)
    assert text == f"ACCESS_REFUSED - queue '{qname}' in vhost '/' in exclusive use"
    conn.close()


@pytest.mark.parametrize(("value", "kind"), [("yes", "longstr"), (1, "signedint")])
def test_non_boolean_argument_is_406(roost: RoostProcess, qname: str, value: Any,
                                     kind: str) -> None:
    conn = connect(roost)
    text = closed_with(406, conn.channel().queue_declare, qname,
                       arguments={"x-single-active-consumer": value})
    assert text == (
        f"PRECONDITION_FAILED - invalid arg 'x-single-active-consumer' for queue '{qname}' "
        f"in vhost '/': {{unacceptable_type,{kind}}}"
    )
    conn.close()
