"""Durable definitions of every type survive a restart and a ``kill -9`` once their reply
was sent (issue 3): the reply to a change of durable definitions (declare-ok, bind-ok,
an HTTP 2xx) waits for the fsync of its journal record, many changes in flight share
one fsync, and non-durable declares never wait."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import aio_pika
import httpx
import pika
import pytest
import stomp

from tests.support import SLOW_SYNC_MS, RoostProcess, restart, sync_ops


def api(server: RoostProcess, user: str = "guest", password: str = "guest") -> httpx.Client:
    return httpx.Client(base_url=server.http_url, auth=(user, password), timeout=10.0)


def ok(response: httpx.Response) -> httpx.Response:
    assert response.is_success, (response.status_code, response.text)
    return response


def amqp(server: RoostProcess, vhost: str = "app") -> pika.BlockingConnection:
    params = pika.URLParameters(server.url)
    params.virtual_host = vhost
    return pika.BlockingConnection(params)


def define_everything(server: RoostProcess) -> pika.BlockingConnection:
    """One of each definition type, through the API a user would use for it; every call
    returns only after its reply."""
    with api(server) as http:
        ok(http.put("/api/vhosts/app", json={"description": "the app", "tags": "prod"}))
        ok(
            http.put(
                "/api/permissions/app/guest", json={"configure": ".*", "write": ".*", "read": ".*"}
            )
        )
        ok(
            http.put(
                "/api/users/alice", json={"password": "wonder", "tags": "monitoring,policymaker"}
            )
        )
        ok(
            http.put(
                "/api/permissions/app/alice",
                json={"configure": "^al\\.", "write": ".*", "read": "^r"},
            )
        )
        ok(
            http.put(
                "/api/topic-permissions/app/alice",
                json={"exchange": "amq.topic", "write": "^a\\.", "read": ".*"},
            )
        )
        ok(
            http.put(
                "/api/policies/app/cap",
                json={
                    "pattern": "^capped\\.",
                    "definition": {"max-length": 2},
                    "apply-to": "queues",
                    "priority": 3,
                },
            )
        )
    conn = amqp(server)
    ch = conn.channel()
    ch.exchange_declare("ae", "fanout", durable=True)
    ch.exchange_declare("src", "direct", durable=True, arguments={"alternate-exchange": "ae"})
    ch.exchange_declare("hidden", "topic", durable=True, internal=True)
    ch.exchange_bind("hidden", "src", routing_key="k")  # exchange to exchange
    ch.queue_declare(
        "orders",
        durable=True,
        arguments={"x-max-length": 3, "x-message-ttl": 600000, "x-dead-letter-exchange": "ae"},
    )
    ch.queue_bind("orders", "hidden", "k")
    ch.queue_declare("leftovers", durable=True)
    ch.queue_bind("leftovers", "ae")
    ch.queue_declare("capped.q", durable=True)
    ch.queue_declare("excl", durable=True, exclusive=True)
    ch.queue_declare("autodel", durable=True, auto_delete=True)
    ch.exchange_declare("tmp.ex", "fanout", durable=False)
    ch.queue_declare("tmp.q", durable=False)
    ch.queue_bind("tmp.q", "src", "t")
    return conn  # still open: the exclusive queue's owner is connected when the server goes


def check_everything(server: RoostProcess) -> None:
    with api(server) as http:
        vhost = ok(http.get("/api/vhosts/app")).json()
        assert (vhost["description"], vhost["tags"]) == ("the app", ["prod"])
        alice = ok(http.get("/api/users/alice")).json()
        assert sorted(alice["tags"]) == ["monitoring", "policymaker"]
        perm = ok(http.get("/api/permissions/app/alice")).json()
        assert (perm["configure"], perm["write"], perm["read"]) == ("^al\\.", ".*", "^r")
        topic = ok(http.get("/api/topic-permissions/app/alice")).json()
        assert [(t["exchange"], t["write"], t["read"]) for t in topic] == [
            ("amq.topic", "^a\\.", ".*")
        ]
        policy = ok(http.get("/api/policies/app/cap")).json()
        assert (
            policy["pattern"],
            policy["definition"],
            policy["apply-to"],
            policy["priority"],
        ) == ("^capped\\.", {"max-length": 2}, "queues", 3)
        src = ok(http.get("/api/exchanges/app/src")).json()
        assert (src["type"], src["durable"], src["arguments"]) == (
            "direct",
            True,
            {"alternate-exchange": "ae"},
        )
        assert ok(http.get("/api/exchanges/app/hidden")).json()["internal"] is True
        orders = ok(http.get("/api/queues/app/orders")).json()
        assert orders["arguments"] == {
            "x-max-length": 3,
            "x-message-ttl": 600000,
            "x-dead-letter-exchange": "ae",
        }
        e2e = ok(http.get("/api/bindings/app/e/src/e/hidden")).json()
        assert [b["routing_key"] for b in e2e] == ["k"]
        for gone in ("excl", "autodel", "tmp.q"):
            assert http.get(f"/api/queues/app/{gone}").status_code == 404, gone
        assert http.get("/api/exchanges/app/tmp.ex").status_code == 404
        with api(server, "alice", "wonder") as as_alice:  # the password came back too
            assert ok(as_alice.get("/api/whoami")).json()["name"] == "alice"
    # and they behave: the e2e binding, the alternate exchange, x-max-length, the policy
    conn = amqp(server)
    ch = conn.channel()
    ch.confirm_delivery()
    persistent = pika.BasicProperties(delivery_mode=2)
    for i in range(5):
        ch.basic_publish("src", "k", b"order %d" % i, persistent)
    ch.basic_publish("src", "no-such-key", b"stray", persistent)
    for i in range(4):
        ch.basic_publish("", "capped.q", b"%d" % i, persistent)
    counts = {
        q: ch.queue_declare(q, passive=True).method.message_count
        for q in ("orders", "leftovers", "capped.q")
    }
    # orders keeps 3 of 5 and dead-letters the 2 it dropped to ae, beside the stray one
    assert counts == {"orders": 3, "leftovers": 3, "capped.q": 2}
    conn.close()


@pytest.mark.parametrize("how", ["graceful stop", "kill -9"])
def test_every_definition_type_survives_a_restart(tmp_path: Path, how: str) -> None:
    server = RoostProcess(tmp_path / "data").start()
    try:
        owner = define_everything(server)
        server = restart(server, kill=how == "kill -9")
        with contextlib.suppress(pika.exceptions.AMQPError, OSError):
            owner.process_data_events(0)  # notices the server went: the socket is released
            owner.close()
        check_everything(server)
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log



def test_durable_definition_replies_follow_the_fsync(slow_sync: RoostProcess) -> None:
    """Each reply comes only after the fsync count rose: with a 1.5 s fsync timer, a
    reply sent before its record was on disk would be caught."""
    conn = amqp(slow_sync, "/")
    ch = conn.channel()
    steps: list[tuple[str, Any]] = [
        ("queue.declare", lambda: ch.queue_declare("d.q", durable=True)),
        ("exchange.declare", lambda: ch.exchange_declare("d.x", "fanout", durable=True)),
        ("queue.bind", lambda: ch.queue_bind("d.q", "d.x")),
        ("exchange.bind", lambda: ch.exchange_bind("d.x", "amq.fanout")),
        ("queue.unbind", lambda: ch.queue_unbind("d.q", "d.x")),
        ("queue.delete", lambda: ch.queue_delete("d.q")),
    ]
    with api(slow_sync) as http:
        steps += [
            ("PUT user", lambda: ok(http.put("/api/users/u1", json={"password": "p", "tags": ""}))),
            ("PUT vhost", lambda: ok(http.put("/api/vhosts/v1"))),
            (
                "PUT permission",
                lambda: ok(
                    http.put(
                        "/api/permissions/v1/u1", json={"configure": "", "write": "", "read": ".*"}
                    )
                ),
            ),
            (
                "PUT policy",
                lambda: ok(
                    http.put(
                        "/api/policies/v1/p",
                        json={"pattern": ".*", "definition": {"max-length": 9}},
                    )
                ),
            ),
            ("PUT queue", lambda: ok(http.put("/api/queues/v1/hq", json={"durable": True}))),
        ]
        for what, step in steps:
            before = sync_ops(slow_sync)
            step()
            assert sync_ops(slow_sync) > before, f"{what} was answered before the fsync"
    conn.close()


def settled_sync_ops(server: RoostProcess) -> int:
    """The fsync count once no fsync is pending: a fresh broker's start-up writes are
    synced by the interval timer, which a loaded box can fire after the test began."""
    count = sync_ops(server)
    while True:
        time.sleep(SLOW_SYNC_MS / 1000 * 1.2)  # one whole timer period with no fsync
        now = sync_ops(server)
        if now == count:
            return now
        count = now


def test_non_durable_declares_never_wait(slow_sync: RoostProcess) -> None:
    conn = amqp(slow_sync, "/")
    ch = conn.channel()
    before = settled_sync_ops(slow_sync)
    started = time.monotonic()
    for i in range(10):
        ch.exchange_declare(f"t.x{i}", "fanout", durable=False)
        ch.queue_declare(f"t.q{i}", durable=False)
        ch.queue_bind(f"t.q{i}", f"t.x{i}")
        ch.queue_declare(f"t.x{i}.durable-but-exclusive", durable=True, exclusive=True)
    ch.queue_declare("", exclusive=True)  # a server-named reply queue
    elapsed = time.monotonic() - started
    # one wait for the fsync timer would take SLOW_SYNC_MS; these were all answered at once
    assert elapsed < SLOW_SYNC_MS / 1000 / 2, elapsed
    assert sync_ops(slow_sync) == before
    conn.close()


def test_pipelined_durable_declares_share_fsyncs_and_survive_kill_9(tmp_path: Path) -> None:
    """200 channels declare a durable queue each at the same moment: the replies wait for
    far fewer fsyncs than declares (group commit), and every queue answered survives."""
    n = 200
    server = RoostProcess(tmp_path / "data").start()
    try:
        before = sync_ops(server)

        async def declare_all() -> None:
            connection = await aio_pika.connect(server.url)
            async with connection:
                channels = [await connection.channel() for _ in range(n)]
                await asyncio.gather(
                    *(ch.declare_queue(f"piped.{i}", durable=True) for i, ch in enumerate(channels))
                )

        asyncio.run(asyncio.wait_for(declare_all(), 60))
        fsyncs = sync_ops(server) - before
        assert 1 <= fsyncs <= n // 5, f"{fsyncs} fsyncs for {n} declares"
        server.kill()
        server = RoostProcess(server.data_dir).start()
        with api(server) as http:
            names = {q["name"] for q in ok(http.get("/api/queues/%2F")).json()}
        assert {f"piped.{i}" for i in range(n)} <= names
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


def test_stomp_subscribe_receipt_follows_the_fsync(slow_sync: RoostProcess) -> None:
    """SUBSCRIBE to /queue/NAME declares a durable queue: its RECEIPT waits for the fsync
    of the definition (as a declare-ok does), and the queue survives a kill -9."""
    from tests.stomp.conftest import Inbox

    conn = stomp.Connection12([("127.0.0.1", slow_sync.stomp_port)])
    inbox = Inbox()
    conn.set_listener("inbox", inbox)
    conn.connect("guest", "guest", wait=True)
    try:
        before = sync_ops(slow_sync)
        conn.subscribe("/queue/stomp.durable", id="s1", headers={"receipt": "r1"})
        assert inbox.receipt(timeout=10) == "r1"
        assert sync_ops(slow_sync) > before, "the RECEIPT came before the fsync"
        before = sync_ops(slow_sync)
        conn.subscribe("/topic/news", id="s2", headers={"receipt": "r2"})  # nothing durable
        assert inbox.receipt(timeout=SLOW_SYNC_MS / 1000 / 2) == "r2"
        assert sync_ops(slow_sync) == before
    finally:
        conn.disconnect()
    slow_sync.kill()
    slow_sync.start()
    with api(slow_sync) as http:
        assert ok(http.get("/api/queues/%2F/stomp.durable")).json()["durable"] is True
