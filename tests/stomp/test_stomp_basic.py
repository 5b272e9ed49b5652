"""STOMP with stomp.py: connect, destinations, ack modes, transactions, receipts."""

from __future__ import annotations

import queue
import time
from pathlib import Path

import pytest

from tests.stomp.conftest import Connect, RawStomp
from tests.support import RoostProcess, running_server


def test_connect_versions_and_server_headers(raw: type[RawStomp]) -> None:
    s = raw()
    s.send(b"CONNECT\naccept-version:1.0,1.1,1.2\nlogin:guest\npasscode:guest\n\n\x00")
    reply = s.read_frame()
    assert reply.startswith(b"CONNECTED\n")
    assert b"version:1.2\n" in reply and b"server:Roost/" in reply and b"session:" in reply
    s2 = raw()
    s2.send(b"STOMP\naccept-version:1.1\nhost:/\nlogin:guest\npasscode:guest\n\n\x00")
    assert b"version:1.1\n" in s2.read_frame()


def test_unsupported_version_and_bad_login_get_error(raw: type[RawStomp]) -> None:
    s = raw()
    s.send(b"CONNECT\naccept-version:2.0\nlogin:guest\npasscode:guest\n\n\x00")
    reply = s.read_until_closed()
    assert reply.startswith(b"ERROR\n") and b"version:1.0,1.1,1.2" in reply
    s = raw()
    s.send(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:wrong\n\n\x00")
    reply = s.read_until_closed()
    assert reply.startswith(b"ERROR\n") and b"access_refused" in reply


def test_stomppy_bad_passcode_is_refused(connect: Connect) -> None:
    import stomp

    with pytest.raises(stomp.exception.ConnectFailedException):
        connect(passcode="nope")


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_queue_send_subscribe_each_version(connect: Connect, qname: str, version: str) -> None:
    conn, inbox = connect(version)
    conn.subscribe(f"/queue/{qname}", id="s1", ack="auto")
    conn.send(f"/queue/{qname}", "hello: x\n", headers={"x-custom": "a:b"})
    msg = inbox.message()
    assert msg.body == "hello: x\n"
    assert msg.headers["destination"] == f"/queue/{qname}"
    assert msg.headers["x-custom"] == "a:b"
    assert msg.headers["subscription"] == "s1"


def test_queue_is_shared_by_competing_subscribers(connect: Connect, qname: str) -> None:
    (a, ia), (b, ib) = connect(), connect()
    a.subscribe(f"/queue/{qname}", id="a", ack="auto")
    b.subscribe(f"/queue/{qname}", id="b", ack="auto", receipt="r")
    ib.receipt()
    for i in range(10):
        a.send(f"/queue/{qname}", str(i))
    got = [ia.message().body for _ in range(5)] + [ib.message().body for _ in range(5)]
    assert sorted(got, key=int) == [str(i) for i in range(10)]


def test_topic_fan_out_and_patterns(connect: Connect) -> None:
    (a, ia), (b, ib), (p, ip) = connect(), connect(), connect()
    a.subscribe("/topic/stock.*.nyse", id="a", receipt="ra")
    b.subscribe("/topic/stock.#", id="b", receipt="rb")
    p.subscribe("/topic/sto*", id="p", receipt="rp")
    ia.receipt(), ib.receipt(), ip.receipt()
    a.send("/topic/stock.ibm.nyse", "1")
    a.send("/topic/stock.ibm.lse", "2")
    a.send("/topic/other", "3")
    assert ia.message().body == "1"
    ia.no_message()
    assert [ib.message().body, ib.message().body] == ["1", "2"]
    assert [ip.message().body, ip.message().body] == ["1", "2"]
    ip.no_message()


def test_durable_topic_subscription_keeps_messages(connect: Connect) -> None:
    conn, inbox = connect()
    conn.subscribe("/topic/durable.t", id="dsub1", ack="client-individual",
                   headers={"durable": "true", "auto-delete": "false"}, receipt="r")
    inbox.receipt()
    conn.disconnect()
    sender, _ = connect()
    sender.send("/topic/durable.t", "kept")
    conn2, inbox2 = connect()
    conn2.subscribe("/topic/durable.t", id="dsub1", ack="auto", headers={"durable": "true"})
    assert inbox2.message().body == "kept"
    conn2.unsubscribe("dsub1", headers={"durable": "true"})


def test_durable_subscriptions_with_one_id_on_two_topics_are_two_queues(
    connect: Connect,
) -> None:
    """A durable subscription is its destination and id together (RabbitMQ names its queue
    from both): the same id on another topic keeps messages of its own."""
    durable = {"durable": "true", "auto-delete": "false"}
    for topic in ("durable.a", "durable.b"):
        conn, inbox = connect()
        conn.subscribe(f"/topic/{topic}", id="same", headers=durable, receipt="r")
        inbox.receipt()
        conn.disconnect()
    sender, sent = connect()
    sender.send("/topic/durable.a", "for a")
    sender.send("/topic/durable.b", "for b")
    sender.send("/topic/durable.a", "for a again", receipt="s")
    sent.receipt()
    for topic, expected in (("durable.a", ["for a", "for a again"]), ("durable.b", ["for b"])):
        conn, inbox = connect()
        conn.subscribe(f"/topic/{topic}", id="same", headers=durable)
        assert [inbox.message().body for _ in expected] == expected
        conn.unsubscribe("same", headers={"durable": "true"})


def test_exchange_and_amq_queue_destinations(connect: Connect, qname: str) -> None:
    conn, inbox = connect()
    conn.subscribe("/exchange/amq.direct/k1", id="x", receipt="r")
    inbox.receipt()
    conn.send("/exchange/amq.direct/k1", "via exchange")
    assert inbox.message().body == "via exchange"
    conn.send(f"/queue/{qname}", "existing")  # declares the queue
    conn.subscribe(f"/amq/queue/{qname}", id="aq")
    msg = inbox.message()
    assert msg.body == "existing" and msg.headers["subscription"] == "aq"


def test_send_to_amq_queue_that_does_not_exist_creates_no_queue(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    """As RabbitMQ 3.10.8's STOMP plugin: the message goes to the default exchange, finds
    no queue and is dropped; the SEND gets its RECEIPT and the connection goes on."""
    import pika

    conn, inbox = connect()
    conn.send(f"/amq/queue/{qname}", "nowhere", receipt="r1")
    assert inbox.receipt() == "r1"
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as exc:
            amqp.channel().queue_declare(qname, passive=True)
        assert exc.value.reply_code == 404
    conn.send(f"/queue/{qname}.ok", "still connected", receipt="r2")
    assert inbox.receipt() == "r2"
    assert inbox.errors.empty()


def test_amq_queue_that_does_not_exist_is_an_error(connect: Connect) -> None:
    conn, inbox = connect()
    conn.subscribe("/amq/queue/no-such-queue-here", id="x")
    err = inbox.errors.get(timeout=5)
    assert err.headers["message"] == "not_found"
    assert "no-such-queue-here" in err.body


def test_temp_queue_request_reply(connect: Connect, qname: str) -> None:
    (requester, ri), (worker, wi) = connect(), connect()
    worker.subscribe(f"/queue/{qname}", id="w", receipt="r")
    wi.receipt()
    requester.send(f"/queue/{qname}", "ping", headers={"reply-to": "/temp-queue/replies"})
    request = wi.message()
    assert request.headers["reply-to"].startswith("/reply-queue/")
    worker.send(request.headers["reply-to"], "pong")
    reply = ri.message()
    assert reply.body == "pong"
    assert reply.headers["destination"] == "/temp-queue/replies"


def test_client_individual_ack_and_nack_requeue(connect: Connect, qname: str) -> None:
    conn, inbox = connect()
    conn.subscribe(f"/queue/{qname}", id="s", ack="client-individual")
    conn.send(f"/queue/{qname}", "a")
    conn.send(f"/queue/{qname}", "b")
    ma, mb = inbox.message(), inbox.message()
    conn.ack(mb.headers["ack"])
    conn.nack(ma.headers["ack"])
    again = inbox.message()
    assert again.body == "a" and again.headers["redelivered"] == "true"
    conn.ack(again.headers["ack"], receipt="done")
    inbox.receipt()
    inbox.no_message()


def test_client_ack_is_cumulative_and_unacked_requeue_on_disconnect(
    connect: Connect, qname: str
) -> None:
    conn, inbox = connect()
    conn.subscribe(f"/queue/{qname}", id="s", ack="client")
    for body in "abc":
        conn.send(f"/queue/{qname}", body)
    msgs = [inbox.message() for _ in range(3)]
    conn.ack(msgs[1].headers["ack"], receipt="r")  # acks a and b
    inbox.receipt()
    conn.disconnect()
    other, oi = connect()
    other.subscribe(f"/queue/{qname}", id="s2")
    m = oi.message()
    assert m.body == "c" and m.headers["redelivered"] == "true"
    oi.no_message()


@pytest.mark.parametrize("header", ["prefetch-count", "prefetch"])  # prefetch: ocamlmq's
def test_prefetch_count_limits_unacked(connect: Connect, qname: str, header: str) -> None:
    conn, inbox = connect()
    for i in range(5):
        conn.send(f"/queue/{qname}", str(i))
    conn.subscribe(f"/queue/{qname}", id="s", ack="client-individual", headers={header: "2"})
    first = [inbox.message(), inbox.message()]
    inbox.no_message()
    conn.ack(first[0].headers["ack"])
    assert inbox.message().body == "2"
    inbox.no_message()


def test_ack_timeout_redelivers_to_another_subscriber(connect: Connect, qname: str) -> None:
    (slow, si), (fast, fi) = connect(), connect()
    slow.subscribe(f"/queue/{qname}", id="slow", ack="client-individual", receipt="r",
                   headers={"prefetch-count": "1"})
    si.receipt()
    slow.send(f"/queue/{qname}", "job", headers={"ack-timeout": "0.3"})
    assert si.message().body == "job"
    fast.subscribe(f"/queue/{qname}", id="fast", ack="client-individual")
    start = time.monotonic()
    again = fi.message(timeout=5)
    assert again.body == "job" and again.headers["redelivered"] == "true"
    assert time.monotonic() - start < 3


def test_transactions_apply_at_commit_and_vanish_on_abort(connect: Connect, qname: str) -> None:
    conn, inbox = connect()
    conn.subscribe(f"/queue/{qname}", id="s", ack="auto", receipt="r")
    inbox.receipt()
    conn.begin("t1")
    conn.send(f"/queue/{qname}", "in-tx", transaction="t1")
    inbox.no_message()
    conn.commit("t1")
    assert inbox.message().body == "in-tx"
    conn.begin("t2")
    conn.send(f"/queue/{qname}", "aborted", transaction="t2")
    conn.abort("t2")
    conn.send(f"/queue/{qname}", "after")
    assert inbox.message().body == "after"


def test_receipts_and_disconnect_receipt(raw: type[RawStomp], qname: str) -> None:
    s = raw()
    s.send(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00")
    s.read_frame()
    s.send(f"SEND\ndestination:/queue/{qname}\nreceipt:77\n\nx\x00".encode())
    assert s.read_frame().startswith(b"RECEIPT\nreceipt-id:77\n")
    s.send(b"DISCONNECT\nreceipt:bye\n\n\x00")
    assert s.read_until_closed().startswith(b"RECEIPT\nreceipt-id:bye\n")


def test_control_destinations(connect: Connect, qname: str) -> None:
    conn, _inbox = connect()
    for _ in range(3):
        conn.send(f"/queue/{qname}", "x")
    got: queue.Queue[dict[str, str]] = queue.Queue()

    class Grab:
        def on_receipt(self, frame: object) -> None:
            got.put(frame.headers)  # type: ignore[attr-defined]

    conn.set_listener("grab", Grab())

    def ask(destination: str, receipt: str) -> dict[str, str]:
        conn.send(destination, "", receipt=receipt)
        headers = got.get(timeout=5)
        assert headers["receipt-id"] == receipt
        return headers

    assert ask(f"/control/count-msgs/queue/{qname}", "c1")["num-messages"] == "3"
    conn.subscribe(f"/queue/{qname}", id="s1")
    conn.subscribe("/topic/ctl.t", id="s2")
    conn.subscribe("/topic/ctl.t", id="s3", receipt="subscribed")
    while got.get(timeout=5)["receipt-id"] != "subscribed":
        pass
    assert ask(f"/control/count-subscribers/queue/{qname}", "c2")["num-subscribers"] == "1"
    assert ask("/control/count-subscribers/topic/ctl.t", "c3")["num-subscribers"] == "2"


def test_heartbeats_are_sent_and_enforced(tmp_path: Path) -> None:
    with running_server(tmp_path, "--stomp-heartbeat-ms", "100") as server:
        s = RawStomp(server.stomp_port)
        s.send(b"CONNECT\naccept-version:1.2\nheart-beat:0,100\nlogin:guest\npasscode:guest\n\n\x00")
        connected = s.read_frame()
        assert b"heart-beat:100,0\n" in connected
        s.sock.settimeout(1.0)
        assert s.sock.recv(10).lstrip(b"\x00") == b"\n"  # an EOL heart-beat arrives
        # a client that promised heart-beats and stays silent is dropped with an ERROR
        s2 = RawStomp(server.stomp_port)
        s2.send(b"CONNECT\naccept-version:1.2\nheart-beat:100,0\nlogin:guest\npasscode:guest\n\n\x00")
        reply = s2.read_until_closed()
        assert reply.startswith(b"CONNECTED\n")
        assert b"ERROR\n" in reply and b"heart-beat" in reply
        s.close()
        s2.close()


def test_stomppy_with_heartbeats_stays_connected(tmp_path: Path, qname: str) -> None:
    """stomp.py's heart-beats keep an idle connection open: the client sends one every
    300 ms (above the broker's 100 ms floor), so the broker would drop it after 600 ms of
    silence, and two seconds idle are six chances to get the enforcement wrong. The
    client asks for the broker's beats only every second: stomp.py gives up on the
    broker after 1.5 intervals, which a loaded test box can miss at 200 ms."""
    import stomp

    from tests.stomp.conftest import Inbox

    with running_server(tmp_path, "--stomp-heartbeat-ms", "100") as server:
        conn = stomp.Connection12([("127.0.0.1", server.stomp_port)], heartbeats=(300, 1000))
        inbox = Inbox()
        conn.set_listener("inbox", inbox)
        conn.connect("guest", "guest", wait=True)
        try:
            conn.subscribe(f"/queue/{qname}", id="s", receipt="r")
            inbox.receipt()
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                with pytest.raises(queue.Empty):
                    inbox.errors.get(timeout=0.1)
            assert conn.is_connected() and inbox.disconnected.empty()
            conn.send(f"/queue/{qname}", "still here")
            assert inbox.message().body == "still here"
        finally:
            conn.disconnect()
