"""Publishing and consuming with pika, the most used Python client."""

from __future__ import annotations

import datetime
import decimal

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, UnroutableError

from tests.integration.conftest import pika_params
from tests.support import RoostProcess, pump, settle

ALL_PROPERTIES = pika.BasicProperties(
    content_type="application/json",
    content_encoding="utf-8",
    headers={
        "str": "text",
        "int": 42,
        "big": 2**40,
        "neg": -7,
        "bool": True,
        "dec": decimal.Decimal("3.14"),
        "bytes": b"\x00\xff",
        "list": [1, "two", [3]],
        "table": {"nested": {"deep": 1}},
        "none": None,
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
    },
    delivery_mode=2,
    priority=5,
    correlation_id="corr-1",
    reply_to="replies",
    expiration="60000",
    message_id="msg-1",
    timestamp=1_700_000_000,
    type="order.created",
    user_id="guest",
    app_id="tests",
    cluster_id="c1",
)


def test_round_trip_keeps_body_and_every_property(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    body = bytes(range(256)) * 1000  # spans several body frames
    ch.basic_publish("", qname, body, ALL_PROPERTIES)
    method, props, got = ch.basic_get(qname, auto_ack=True)
    assert got == body
    assert method.routing_key == qname and method.exchange == ""
    assert method.redelivered is False and method.message_count == 0
    for name in ("content_type", "content_encoding", "delivery_mode", "priority",
                 "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
                 "type", "user_id", "app_id", "cluster_id"):
        assert getattr(props, name) == getattr(ALL_PROPERTIES, name), name
    assert props.headers == ALL_PROPERTIES.headers


def test_empty_body(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"")
    _m, _p, body = ch.basic_get(qname, auto_ack=True)
    assert body == b""


def test_get_empty_and_message_count(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    assert ch.basic_get(qname) == (None, None, None)
    for i in range(3):
        ch.basic_publish("", qname, str(i).encode())
    assert ch.queue_declare(qname, passive=True).method.message_count == 3
    method, _p, body = ch.basic_get(qname, auto_ack=True)
    assert (body, method.message_count) == (b"0", 2)


def test_consume_in_order_with_manual_ack(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    for i in range(100):
        ch.basic_publish("", qname, str(i).encode())
    got = []
    for method, _props, body in ch.consume(qname, inactivity_timeout=2):
        if method is None:
            break
        got.append(int(body))
        ch.basic_ack(method.delivery_tag)
        if len(got) == 100:
            break
    ch.cancel()
    assert got == list(range(100))
    assert ch.queue_declare(qname, passive=True).method.message_count == 0


def test_prefetch_caps_unacked_deliveries(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.queue_declare(qname)
    for i in range(10):
        ch.basic_publish("", qname, str(i).encode())
    ch.basic_qos(prefetch_count=3)
    got: list[int] = []
    ch.basic_consume(qname, lambda c, m, p, b: got.append(m.delivery_tag))
    assert pump(conn, lambda: len(got) >= 3)
    settle(conn)
    assert len(got) == 3
    ch.basic_ack(got[-1], multiple=True)
    assert pump(conn, lambda: len(got) >= 6)
    settle(conn)
    assert len(got) == 6


def test_nack_requeue_sets_redelivered_and_reject_drops(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"a")
    ch.basic_publish("", qname, b"b")
    m1, _p, _b = ch.basic_get(qname)
    ch.basic_nack(m1.delivery_tag, requeue=True)
    m2, _p, body = ch.basic_get(qname)
    assert (body, m2.redelivered) == (b"a", True)
    ch.basic_reject(m2.delivery_tag, requeue=False)
    m3, _p, body = ch.basic_get(qname)
    assert (body, m3.redelivered) == (b"b", False)
    ch.basic_ack(m3.delivery_tag)
    assert ch.queue_declare(qname, passive=True).method.message_count == 0


def test_recover_redelivers_unacked(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"x")
    ch.basic_get(qname)
    ch.basic_recover(requeue=True)
    method, _p, body = ch.basic_get(qname, auto_ack=True)
    assert (body, method.redelivered) == (b"x", True)


def test_unacked_messages_return_when_connection_closes(roost: RoostProcess, qname: str) -> None:
    first = pika.BlockingConnection(pika_params(roost))
    ch = first.channel()
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"held")
    ch.basic_get(qname)  # unacked
    first.close()
    second = pika.BlockingConnection(pika_params(roost))
    method, _p, body = second.channel().basic_get(qname, auto_ack=True)
    assert (body, method.redelivered) == (b"held", True)
    second.close()


def test_round_robin_across_two_consumers(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.queue_declare(qname)
    seen: dict[str, list[bytes]] = {"a": [], "b": []}
    ch.basic_consume(qname, lambda c, m, p, b: seen["a"].append(b), auto_ack=True)
    ch2 = conn.channel()
    ch2.basic_consume(qname, lambda c, m, p, b: seen["b"].append(b), auto_ack=True)
    for i in range(6):
        ch.basic_publish("", qname, str(i).encode())
    assert pump(conn, lambda: len(seen["a"]) + len(seen["b"]) >= 6)
    assert seen == {"a": [b"0", b"2", b"4"], "b": [b"1", b"3", b"5"]}


def test_mandatory_unroutable_is_returned(ch) -> None:  # type: ignore[no-untyped-def]
    ch.confirm_delivery()
    with pytest.raises(UnroutableError) as info:
        ch.basic_publish("amq.direct", "nobody-home", b"lost?", mandatory=True)
    returned = info.value.messages[0]
    assert returned.method.reply_code == 312
    assert returned.method.reply_text == "NO_ROUTE"
    assert returned.body == b"lost?"


def test_publisher_confirms_every_message(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    ch.confirm_delivery()
    for i in range(500):
        ch.basic_publish("", qname, str(i).encode())  # raises NackError on nack
    assert ch.queue_declare(qname, passive=True).method.message_count == 500


def test_tx_commit_and_rollback(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    ch.tx_select()
    ch.basic_publish("", qname, b"rolled back")
    assert ch.queue_declare(qname, passive=True).method.message_count == 0
    ch.tx_rollback()
    ch.basic_publish("", qname, b"committed")
    ch.tx_commit()
    method, _p, body = ch.basic_get(qname)
    assert body == b"committed"
    ch.basic_ack(method.delivery_tag)  # held until commit
    assert ch.queue_declare(qname, passive=True).method.message_count == 0
    ch.tx_rollback()  # the ack is dropped: the message is still unacked on the channel
    ch.tx_commit()


def test_tx_and_confirm_do_not_mix(conn) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.tx_select()
    with pytest.raises(ChannelClosedByBroker) as info:
        ch.confirm_delivery()
    assert info.value.reply_code == 406


def test_topic_fanout_headers_and_e2e_routing(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.exchange_declare(f"{qname}.topic", "topic")
    ch.exchange_declare(f"{qname}.fan", "fanout")
    ch.exchange_declare(f"{qname}.hdr", "headers")
    for q in ("t", "f", "h"):
        ch.queue_declare(f"{qname}.{q}")
    ch.queue_bind(f"{qname}.t", f"{qname}.topic", "orders.*.eu")
    ch.exchange_bind(f"{qname}.fan", f"{qname}.topic", "orders.#")
    ch.queue_bind(f"{qname}.f", f"{qname}.fan")
    ch.queue_bind(f"{qname}.h", f"{qname}.hdr", arguments={"x-match": "any", "kind": "a"})
    ch.basic_publish(f"{qname}.topic", "orders.new.eu", b"1")
    ch.basic_publish(f"{qname}.topic", "orders.new.us", b"2")
    ch.basic_publish(f"{qname}.hdr", "", b"3", pika.BasicProperties(headers={"kind": "a"}))
    ch.basic_publish(f"{qname}.hdr", "", b"4", pika.BasicProperties(headers={"kind": "b"}))

    def drain(q: str) -> list[bytes]:
        out = []
        while True:
            _m, _p, body = ch.basic_get(f"{qname}.{q}", auto_ack=True)
            if body is None:
                return out
            out.append(body)

    assert drain("t") == [b"1"]
    assert drain("f") == [b"1", b"2"]
    assert drain("h") == [b"3"]
    ch.exchange_unbind(f"{qname}.fan", f"{qname}.topic", "orders.#")
    ch.basic_publish(f"{qname}.topic", "orders.new.eu", b"5")
    assert drain("f") == []


def test_server_named_queue_and_last_queue_shortcut(ch) -> None:  # type: ignore[no-untyped-def]
    name = ch.queue_declare("", exclusive=True).method.queue
    assert name.startswith("amq.gen-")
    ch.queue_bind("", "amq.fanout")  # empty queue name: the last one declared
    ch.basic_publish("amq.fanout", "", b"x")
    _m, _p, body = ch.basic_get(name, auto_ack=True)
    assert body == b"x"


def test_consumer_is_cancelled_when_queue_is_deleted(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.queue_declare(qname)
    cancelled: list[object] = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame))
    ch.basic_consume(qname, lambda *a: None)
    other = conn.channel()
    other.queue_delete(qname)
    assert pump(conn, lambda: len(cancelled) == 1)
    assert ch.is_open


def test_purge_and_delete_counts(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    for _ in range(4):
        ch.basic_publish("", qname, b"x")
    assert ch.queue_purge(qname).method.message_count == 4
    ch.basic_publish("", qname, b"x")
    assert ch.queue_delete(qname).method.message_count == 1
    assert ch.queue_delete(qname).method.message_count == 0  # missing: still ok


def test_queue_unbind_stops_routing(ch, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch.queue_declare(qname)
    ch.queue_bind(qname, "amq.direct", "k")
    ch.queue_unbind(qname, "amq.direct", "k")
    ch.basic_publish("amq.direct", "k", b"x")
    assert ch.queue_declare(qname, passive=True).method.message_count == 0


def test_flow_stops_and_resumes_deliveries(conn, qname: str) -> None:  # type: ignore[no-untyped-def]
    ch = conn.channel()
    ch.queue_declare(qname)
    got: list[bytes] = []
    ch.basic_consume(qname, lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.flow(False)
    ch.basic_publish("", qname, b"1")
    settle(conn)
    assert got == []
    ch.flow(True)
    assert pump(conn, lambda: got == [b"1"])
