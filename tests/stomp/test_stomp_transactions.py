"""STOMP transactions: ACK and NACK inside BEGIN…COMMIT take effect at COMMIT, not at
ABORT; an open transaction is discarded when the connection ends."""

from __future__ import annotations

import httpx
import pika
import pytest

from tests.stomp.conftest import Connect, RawStomp, queue_info
from tests.support import RoostProcess, eventually

CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"


def counts(roost: RoostProcess, qname: str) -> tuple[int, int]:
    """(ready, unacknowledged) of a queue."""
    info = queue_info(roost, qname)
    return info["messages_ready"], info["messages_unacknowledged"]


def test_ack_in_transaction_applies_at_commit_and_not_at_abort(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    conn, inbox = connect()
    conn.subscribe(f"/queue/{qname}", id="s", ack="client-individual", receipt="r")
    inbox.receipt()
    conn.send(f"/queue/{qname}", "committed")
    msg = inbox.message()
    conn.begin("t1")
    conn.ack(msg.headers["ack"], transaction="t1", receipt="a1")
    inbox.receipt()
    assert counts(roost, qname) == (0, 1)  # buffered, not applied
    conn.commit("t1", receipt="c1")
    inbox.receipt()
    assert counts(roost, qname) == (0, 0)

    conn.send(f"/queue/{qname}", "aborted")
    msg = inbox.message()
    conn.begin("t2")
    conn.ack(msg.headers["ack"], transaction="t2")
    conn.abort("t2", receipt="ab")
    inbox.receipt()
    assert counts(roost, qname) == (0, 1)  # the ACK went with the transaction
    conn.disconnect()  # so the message is still this client's: it goes back to the queue
    other, other_inbox = connect()
    other.subscribe(f"/queue/{qname}", id="o", ack="auto")
    again = other_inbox.message()
    assert again.body == "aborted" and again.headers["redelivered"] == "true"


def test_nack_in_transaction_applies_at_commit_and_not_at_abort(
    roost: RoostProcess, connect: Connect, qname: str
) -> None:
    conn, inbox = connect()
    conn.subscribe(f"/queue/{qname}", id="s", ack="client-individual", receipt="r")
    inbox.receipt()
    conn.send(f"/queue/{qname}", "job")
    msg = inbox.message()
    conn.begin("t1")
    conn.nack(msg.headers["ack"], transaction="t1", receipt="n1")
    inbox.receipt()
    inbox.no_message()  # not requeued yet
    assert counts(roost, qname) == (0, 1)
    conn.commit("t1")
    again = inbox.message()  # requeued at COMMIT, back to the only subscriber
    assert again.body == "job" and again.headers["redelivered"] == "true"

    conn.begin("t2")
    conn.nack(again.headers["ack"], transaction="t2")
    conn.abort("t2", receipt="ab")
    inbox.receipt()
    inbox.no_message()  # the NACK was dropped: still held, not redelivered
    assert counts(roost, qname) == (0, 1)
    conn.ack(again.headers["ack"], receipt="done")
    inbox.receipt()
    assert counts(roost, qname) == (0, 0)


@pytest.mark.parametrize("how", ["disconnect", "socket-closed"])
def test_open_transaction_is_discarded_when_the_connection_ends(
    roost: RoostProcess, raw: type[RawStomp], qname: str, how: str
) -> None:
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        ch.queue_declare(qname, durable=True)
        s = raw()
        s.send(CONNECT)
        assert s.read_frame().startswith(b"CONNECTED\n")
        port = s.sock.getsockname()[1]
        s.send(b"BEGIN\ntransaction:t\n\n\x00")
        s.send(f"SEND\ndestination:/queue/{qname}\ntransaction:t\nreceipt:s\n\nlost\x00".encode())
        assert s.read_frame().startswith(b"RECEIPT\nreceipt-id:s\n")  # buffered in the tx
        assert connected_from(roost, port)
        if how == "disconnect":
            s.send(b"DISCONNECT\nreceipt:bye\n\n\x00")
            assert s.read_until_closed().startswith(b"RECEIPT\nreceipt-id:bye\n")
        else:
            s.close()
        eventually(
            lambda: not connected_from(roost, port), what="the broker saw the connection end"
        )
        assert ch.queue_declare(qname, passive=True).method.message_count == 0


def connected_from(roost: RoostProcess, port: int) -> bool:
    reply = httpx.get(f"{roost.http_url}/api/connections", auth=("guest", "guest"), timeout=5)
    return any(c.get("peer_port") == port for c in reply.json())
