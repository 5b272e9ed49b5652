"""Deliveries that need an acknowledgement: prefix subscriptions with client acks, and a
connection that dies while it holds messages."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.stomp.conftest import (
    Connect,
    RawStomp,
    bindings_of,
    queue_info,
    subscription_queue,
)
from tests.support import RoostProcess, eventually

CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"


@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
def test_prefix_subscription_gets_only_its_matches(
    roost: RoostProcess, connect: Connect, ack: str
) -> None:
    """amq.topic routes a prefix subscription itself (a prefix binding): topics outside
    the prefix never reach the subscription's queue, so they cost it no delivery work
    (its queue counts one publish, not four) and cannot hold its prefetch: with
    prefetch 2, the matching message arrives behind three others."""
    conn, inbox = connect()
    sub_id = f"prefix-{ack}"
    conn.subscribe(
        "/topic/pfxack*", id=sub_id, ack=ack, headers={"prefetch-count": "2"}, receipt="r"
    )
    inbox.receipt()
    queue = subscription_queue(roost, sub_id)
    for i in range(3):
        conn.send(f"/topic/elsewhere.{i}", "not for this subscription")
    conn.send("/topic/pfxac", "one character short of the prefix")
    conn.send("/topic/pfxack.wanted", "wanted", receipt="sent")
    inbox.receipt()
    msg = inbox.message()
    assert msg.body == "wanted"
    assert msg.headers["destination"] == "/topic/pfxack.wanted"
    inbox.no_message()
    if ack != "auto":
        conn.ack(msg.headers["ack"], receipt="acked")
        inbox.receipt()
    info = eventually(
        lambda: (q := queue_info(roost, queue))["messages_unacknowledged"] == 0 and q,
        what="the subscription's queue has no unacknowledged messages",
    )
    assert info["message_stats"]["publish"] == 1
    assert info["message_stats"]["deliver_get"] == 1
    assert info["messages_ready"] == 0
    binding = [b for b in bindings_of(roost, queue) if b["source"] == "amq.topic"]
    assert [(b["routing_key"], b["arguments"]) for b in binding] == [
        ("pfxack", {"x-key-prefix": True})
    ]


@pytest.mark.parametrize("how", ["close", "reset"])
def test_socket_death_requeues_unacked_at_once(
    raw: type[RawStomp], connect: Connect, qname: str, how: str
) -> None:
    """No DISCONNECT, just a closed (FIN) or reset (RST) socket: the messages it held go
    to the next subscriber at once, not after the consumer timeout."""
    holder = raw()
    holder.send(CONNECT)
    assert holder.read_frame().startswith(b"CONNECTED\n")
    holder.send(
        f"SUBSCRIBE\nid:h\ndestination:/queue/{qname}\nack:client-individual\n"
        "receipt:sub\n\n\x00".encode()
    )
    assert holder.read_frame().startswith(b"RECEIPT\nreceipt-id:sub\n")
    other, inbox = connect()
    other.send(f"/queue/{qname}", "held")
    assert holder.read_frame().startswith(b"MESSAGE\n")
    other.subscribe(f"/queue/{qname}", id="o", ack="auto", receipt="r")
    inbox.receipt()
    inbox.no_message()  # the holder has it, unacknowledged
    if how == "reset":  # linger 0: close() sends RST instead of FIN
        holder.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    started = time.monotonic()
    holder.close()
    msg = inbox.message()
    elapsed = time.monotonic() - started
    assert msg.body == "held" and msg.headers["redelivered"] == "true"
    assert elapsed < 2.0, f"requeued only after {elapsed:.1f} s"
