"""Issue 22 item 3, "consumers see only committed messages", across a failover: a
message that reached one member but no majority is not handed out by that member when it
is promoted, until its new term commits it (a majority holds its first snapshot)."""

from __future__ import annotations

import time
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node

TTL = ("--cluster-lease-ttl", "2")
FIVE = {"x-queue-type": "quorum", "x-quorum-initial-group-size": 5}


def get(url: str, queue: str) -> bytes | None:
    with pika.BlockingConnection(pika.URLParameters(url)) as conn:
        method, _p, raw = conn.channel().basic_get(queue, auto_ack=True)
        return raw if method is not None else None


def test_a_promoted_member_holds_back_what_no_majority_held_until_it_commits(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    """Five members; n3..n5 killed, so n1 (leader) and n2 hold the publish: two of five,
    never committed. n1 killed: n2 alone is elected and must not deliver it. n3 and n4
    return and take n2's snapshot: three of five hold it, and only then is it delivered."""
    names = [f"n{i}" for i in range(1, 6)]
    n1, n2, n3, n4, n5 = nodes = [
        node(shared_etcd, tmp_path / n, n, *TTL, prefix=etcd_prefix) for n in names
    ]
    try:
        for n in nodes:
            n.start()
        for other in names[1:]:
            n1.wait_for_log(f"node '{other}' is up")
            n1.wait_for_log(f"link with {other} up")
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("unsure", durable=True, arguments=FIVE)
        with pika.BlockingConnection(pika.URLParameters(n2.url)) as conn:
            conn.channel().queue_declare("barrier", durable=True)  # classic, homed on n2
        for n in (n3, n4, n5):
            n.kill()
        for other in ("n3", "n4", "n5"):
            n1.wait_for_log(f"link with {other} down")
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            ch.basic_publish("", "unsure", b"two-of-five")
            ch.queue_declare("unsure", passive=True)  # n1 took it and shipped it to n2
            ch.confirm_delivery()
            # forwarded to n2 over the link that carried the record before it: once
            # confirmed, n2 holds the record
            ch.basic_publish("", "barrier", b"after")
            method, _p, _b = ch.basic_get("unsure")
            assert method is None, "delivered with two members of five holding it"
        n1.kill()
        n2.wait_for_log("now led here", timeout=30)
        assert get(n2.url, "unsure") is None, "a message no majority held was delivered"
        n3.start()
        n4.start()
        got = None
        deadline = time.monotonic() + 60
        while got is None and time.monotonic() < deadline:
            got = get(n2.url, "unsure")
            if got is None:
                time.sleep(0.2)
        assert got == b"two-of-five", n2.log[-2000:]
    finally:
        for n in nodes:
            n.kill()
    assert "Traceback" not in n2.log, n2.log
