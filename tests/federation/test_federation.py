"""Federation (issue 23 item 3) between real brokers: up to three Roost servers and a
RabbitMQ 3.10 upstream on loopback ports. Upstreams and policies are set through the
HTTP API, messages go in and come out with pika, links are watched through
/api/federation-links."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest

from tests.rabbitmq import RabbitMQ
from tests.support import RoostProcess, eventually, free_port


@pytest.fixture(scope="module")
def trio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RoostProcess]]:
    """Three Roosts on one host, each with its own node name (and so cluster name)."""
    servers = [
        RoostProcess(tmp_path_factory.mktemp(n), "--node-name", node_name(n)).start()
        for n in "abc"
    ]
    try:
        yield servers
    finally:
        for s in servers:
            s.kill()


def node_name(letter: str) -> str:
    return f"fed-{letter}@localhost"


def api(server: RoostProcess) -> httpx.Client:
    return httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest"), timeout=10)


def federate(
    down: RoostProcess,
    upstream: str,
    value: dict[str, Any],
    pattern: str,
    apply_to: str = "exchanges",
) -> None:
    """Upstream ``upstream`` and a policy federating what ``pattern`` matches from it."""
    with api(down) as c:
        c.put(
            f"/parameters/federation-upstream/%2F/{upstream}", json={"value": value}
        ).raise_for_status()
        c.put(
            f"/policies/%2F/fed-{upstream}",
            json={
                "pattern": pattern,
                "apply-to": apply_to,
                "definition": {"federation-upstream": upstream},
            },
        ).raise_for_status()


def links(server: RoostProcess) -> list[dict[str, Any]]:
    with api(server) as c:
        rows: list[dict[str, Any]] = c.get("/federation-links").json()
    return rows


def running(server: RoostProcess, resource: str) -> dict[str, Any] | None:
    for row in links(server):
        if resource in (row.get("exchange"), row.get("queue")) and row["status"] == "running":
            return row
    return None


def channel(url: str) -> tuple[pika.BlockingConnection, Any]:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    return conn, conn.channel()


def take(url: str, queue: str) -> list[tuple[Any, bytes]]:
    got = []
    conn, ch = channel(url)
    with conn:
        while True:
            method, props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                return got
            got.append((props, body))


def upstream_bindings(server: RoostProcess, exchange: str) -> set[str]:
    """The keys the upstream queue is bound with; it is named as RabbitMQ 3.10 names
    it: ``federation: UPSTREAM-EXCHANGE -> CLUSTER-NAME:DOWNSTREAM-EXCHANGE``."""
    with api(server) as c:
        rows = c.get(f"/exchanges/%2F/{exchange}/bindings/source").json()
    return {
        r["routing_key"]
        for r in rows
        if r["destination"].startswith(f"federation: {exchange} -> ")
        and r["destination"].endswith(f":{exchange}")
    }


def unique(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:6]}"


def test_exchange_federation_follows_bindings(trio: list[RoostProcess]) -> None:
    """Roost A upstream, Roost B downstream: B's bindings appear (and disappear) on A's
    federation queue; what A's exchange routes to them arrives in B's queue with
    x-received-from; what no binding of B wants does not leave A."""
    a, b, _ = trio
    x, q = unique("fed.x"), unique("q")
    for server in (a, b):
        conn, ch = channel(server.url)
        with conn:
            ch.exchange_declare(x, "topic", durable=True)
    conn, ch = channel(b.url)
    with conn:
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, x, "orders.#")
    federate(b, "a", {"uri": a.url}, f"^{x}$")
    row = eventually(lambda: running(b, x), what=lambda: links(b))
    assert row["type"] == "exchange" and row["upstream"] == "a"
    assert row["upstream_exchange"] == x and row["vhost"] == "/"
    assert "guest" not in row["uri"] and row["uri"].startswith("amqp://127.0.0.1:")
    shown = subprocess.run(
        [sys.executable, "-m", "roost", "ctl", "--url", b.http_url, "federation_status", "-q",
         "exchange", "upstream", "status"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    assert f"{x}\ta\trunning" in shown.splitlines(), shown
    eventually(
        lambda: upstream_bindings(a, x) == {"orders.#"}, what=lambda: upstream_bindings(a, x)
    )

    conn, ch = channel(a.url)
    with conn:
        ch.confirm_delivery()
        ch.basic_publish(x, "orders.eu", b"one", pika.BasicProperties(delivery_mode=2))
        ch.basic_publish(x, "stock.eu", b"not-bound", pika.BasicProperties(delivery_mode=2))
    got = eventually(lambda: take(b.url, q))
    assert [body for _, body in got] == [b"one"]
    (entry,) = got[0][0].headers["x-received-from"]
    assert entry["exchange"] == x and entry["redelivered"] is False
    assert entry["uri"] == row["uri"]

    conn, ch = channel(b.url)  # the bindings change downstream: upstream follows
    with conn:
        ch.queue_bind(q, x, "stock.#")
        ch.queue_unbind(q, x, "orders.#")
    eventually(lambda: upstream_bindings(a, x) == {"stock.#"}, what=lambda: upstream_bindings(a, x))
    conn, ch = channel(a.url)
    with conn:
        ch.confirm_delivery()
        ch.basic_publish(x, "orders.eu", b"now-unbound", pika.BasicProperties(delivery_mode=2))
        ch.basic_publish(x, "stock.eu", b"two", pika.BasicProperties(delivery_mode=2))
    got = eventually(lambda: take(b.url, q))
    assert [body for _, body in got] == [b"two"]

    with api(b) as c:  # restart by id, as RabbitMQ's API does; an unknown id is 404
        assert c.delete(f"/federation-links/vhost/%2F/{row['id']}/restart").status_code == 204
        assert c.delete("/federation-links/vhost/%2F/nope/restart").status_code == 404
    eventually(lambda: running(b, x), what=lambda: links(b))
    with api(b) as c:  # the policy gone: the link stops
        c.delete("/policies/%2F/fed-a").raise_for_status()
    eventually(lambda: not [r for r in links(b) if r["exchange"] == x], what=lambda: links(b))


def test_ring_with_max_hops_delivers_each_message_once(trio: list[RoostProcess]) -> None:
    """A <- C, B <- A, C <- B (each federates from the one before), fanout exchanges
    with a queue each. max-hops 2: a message published on any of them reaches every
    broker exactly once, never going round again."""
    x = unique("ring")
    q = unique("ring-q")
    for server in trio:
        conn, ch = channel(server.url)
        with conn:
            ch.exchange_declare(x, "fanout", durable=True)
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, x)
    for i, down in enumerate(trio):
        up = trio[i - 1]
        federate(down, f"ring{i}", {"uri": up.url, "max-hops": 2}, f"^{x}$")
    for down in trio:
        eventually(lambda: running(down, x), what=lambda: links(down))  # noqa: B023
    for up in trio:  # each broker's federation queue is bound
        eventually(
            lambda up=up: upstream_bindings(up, x) == {q},
            what=lambda up=up: (upstream_bindings(up, x), links(up)),
        )
    for i, server in enumerate(trio):
        conn, ch = channel(server.url)
        with conn:
            ch.confirm_delivery()
            ch.basic_publish(x, "", f"from-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    seen: list[list[bytes]] = [[], [], []]

    def all_three() -> bool:
        for i, server in enumerate(trio):
            seen[i] += [body for _, body in take(server.url, q)]
        return all(len(s) >= 3 for s in seen)

    eventually(all_three, what=lambda: seen)
    time.sleep(1.0)  # anything going round again would arrive within this
    for i, server in enumerate(trio):
        seen[i] += [body for _, body in take(server.url, q)]
        assert sorted(seen[i]) == [b"from-0", b"from-1", b"from-2"], seen
    for i in range(3):
        with api(trio[i]) as c:
            c.delete(f"/policies/%2F/fed-ring{i}").raise_for_status()


def test_ring_stops_at_x_received_from_not_max_hops(trio: list[RoostProcess]) -> None:
    """The same ring with max-hops 10: each broker announces its own node name as its
    cluster name, so a message that comes round to the broker it already passed is
    dropped by name (x-received-from), long before 10 hops: still exactly once each."""
    for server, letter in zip(trio, "abc", strict=True):
        with api(server) as c:
            assert c.get("/cluster-name").json() == {"name": node_name(letter)}
            assert c.get("/overview").json()["cluster_name"] == node_name(letter)
        conn, _ = channel(server.url)
        with conn:  # what a federation link of another broker reads
            props = conn._impl.server_properties
            assert props["cluster_name"] == node_name(letter)
    x = unique("ring10")
    q = unique("ring10-q")
    for server in trio:
        conn, ch = channel(server.url)
        with conn:
            ch.exchange_declare(x, "fanout", durable=True)
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, x)
    for i, down in enumerate(trio):
        federate(down, f"ring10-{i}", {"uri": trio[i - 1].url, "max-hops": 10}, f"^{x}$")
    for down in trio:
        eventually(lambda: running(down, x), what=lambda: links(down))  # noqa: B023
    for up in trio:
        eventually(
            lambda up=up: upstream_bindings(up, x) == {q},
            what=lambda up=up: (upstream_bindings(up, x), links(up)),
        )
    for i, server in enumerate(trio):
        conn, ch = channel(server.url)
        with conn:
            ch.confirm_delivery()
            ch.basic_publish(x, "", f"from-{i}".encode(), pika.BasicProperties(delivery_mode=2))
    seen: list[list[tuple[Any, bytes]]] = [[], [], []]

    def all_three() -> bool:
        for i, server in enumerate(trio):
            seen[i] += take(server.url, q)
        return all(len(s) >= 3 for s in seen)

    eventually(all_three, what=lambda: seen)
    time.sleep(1.0)  # anything going round again would arrive within this
    for i, server in enumerate(trio):
        seen[i] += take(server.url, q)
        assert sorted(body for _, body in seen[i]) == [b"from-0", b"from-1", b"from-2"], seen
        for props, body in seen[i]:
            hops = (props.headers or {}).get("x-received-from", [])
            origin = int(body.decode().rpartition("-")[2])
            # its own message came with no hop; the others through 1 or 2 brokers, each
            # named by the name that broker announces
            assert len(hops) == (i - origin) % 3, (i, body, hops)
            assert [h["cluster-name"] for h in hops] == [
                node_name("abc"[(i - k) % 3]) for k in range(len(hops), 0, -1)
            ], (i, body, hops)
    for i in range(3):
        with api(trio[i]) as c:
            c.delete(f"/policies/%2F/fed-ring10-{i}").raise_for_status()


def test_queue_federation_moves_messages_only_to_where_consumers_are(
    trio: list[RoostProcess],
) -> None:
    """A's queue holds 60 messages; B and C federate their queue of the same name from
    it. Without consumers nothing moves; a consumer on B gets all 60, C none."""
    a, b, c = trio
    q = unique("work")
    conn, ch = channel(a.url)
    with conn:
        ch.queue_declare(q, durable=True)
        ch.confirm_delivery()
        for i in range(60):
            ch.basic_publish("", q, f"w{i}".encode(), pika.BasicProperties(delivery_mode=2))
    for down in (b, c):
        conn, ch = channel(down.url)
        with conn:
            ch.queue_declare(q, durable=True)
        federate(down, "work", {"uri": a.url}, f"^{q}$", apply_to="queues")
        row = eventually(lambda: running(down, q), what=lambda: links(down))  # noqa: B023
        assert row["type"] == "queue" and row["upstream_queue"] == q
        assert row["consumer_tag"] == "federation-link-work"  # RabbitMQ 3.10's
    time.sleep(1.0)  # no consumer anywhere: a wrong link would move messages meanwhile
    conn, ch = channel(a.url)
    with conn:
        assert ch.queue_declare(q, passive=True).method.message_count == 60
    got: list[bytes] = []
    conn, ch = channel(b.url)
    with conn:
        ch.basic_qos(prefetch_count=5)

        def on_message(chan: Any, method: Any, props: Any, body: bytes) -> None:
            got.append(body)
            chan.basic_ack(method.delivery_tag)

        ch.basic_consume(q, on_message)
        deadline = time.monotonic() + 15
        while len(got) < 60 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
    assert sorted(got) == sorted(f"w{i}".encode() for i in range(60))
    assert take(c.url, q) == []
    conn, ch = channel(a.url)
    with conn:
        assert ch.queue_declare(q, passive=True).method.message_count == 0
    for down in (b, c):
        with api(down) as cl:
            cl.delete("/policies/%2F/fed-work").raise_for_status()


def test_rabbitmq_upstream_to_roost_downstream(tmp_path: Path, trio: list[RoostProcess]) -> None:
    """RabbitMQ 3.10 as the upstream of a Roost exchange: the binding reaches RabbitMQ
    (its federation queue routes by it), messages arrive with x-received-from naming
    RabbitMQ's cluster, and an unknown upstream exchange shows an error status."""
    rabbit = RabbitMQ(tmp_path / "rabbit").start()
    try:
        b = trio[1]
        x, q = unique("fed.rx"), unique("q")
        conn, ch = channel(rabbit.url)
        with conn:
            ch.exchange_declare(x, "direct", durable=True)
        conn, ch = channel(b.url)
        with conn:
            ch.exchange_declare(x, "direct", durable=True)
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, x, "eu")
        federate(b, "rabbit", {"uri": rabbit.url, "expires": 60000}, f"^{x}$")
        eventually(lambda: running(b, x), timeout=20, what=lambda: links(b))
        listed = rabbit.ctl("list_bindings", "source_name", "destination_name", "routing_key")
        assert any(
            x in line and "federation: " in line and line.endswith("eu")
            for line in listed.splitlines()
        ), listed
        conn, ch = channel(rabbit.url)
        with conn:
            ch.confirm_delivery()
            ch.basic_publish(x, "eu", b"from-rabbit", pika.BasicProperties(delivery_mode=2))
            ch.basic_publish(x, "us", b"unbound", pika.BasicProperties(delivery_mode=2))
        got = eventually(lambda: take(b.url, q), timeout=20)
        assert [body for _, body in got] == [b"from-rabbit"]
        (entry,) = got[0][0].headers["x-received-from"]
        # RabbitMQ's cluster name, as it announced it (its node name, the host's name)
        assert entry["cluster-name"].startswith(rabbit.node.split("@")[0] + "@")
        args = rabbit.ctl("list_queues", "name", "arguments")  # expires: x-expires there
        assert any(line.startswith("federation: ") and "x-expires" in line and "60000" in line
                   for line in args.splitlines()), args
        with api(b) as c:
            c.put(
                "/parameters/federation-upstream/%2F/rabbit",
                json={"value": {"uri": rabbit.url, "exchange": "no-such"}},
            ).raise_for_status()
        row = eventually(
            lambda: next(
                (r for r in links(b) if r.get("exchange") == x and r["status"] == "error"), None
            ),
            timeout=20,
        )
        assert "NOT_FOUND" in row["error"] or "404" in row["error"], row
        with api(b) as c:
            c.delete("/policies/%2F/fed-rabbit").raise_for_status()
    finally:
        rabbit.stop()


def test_bad_upstream_values_are_refused(trio: list[RoostProcess]) -> None:
    a = trio[0]
    with api(a) as c:
        bad = c.put("/parameters/federation-upstream/%2F/u", json={"value": {"uri": 5}})
        assert bad.status_code == 400 and "uri" in bad.text
        bad = c.put(
            "/parameters/federation-upstream/%2F/u",
            json={"value": {"uri": a.url, "ack-mode": "sometimes"}},
        )
        assert bad.status_code == 400
        ok = c.put("/parameters/federation-upstream-set/%2F/s", json={"value": [{"upstream": "u"}]})
        assert ok.status_code in (201, 204), ok.text
        bad = c.put("/parameters/federation-upstream-set/%2F/s2", json={"value": [{"x": 1}]})
        assert bad.status_code == 400


def fixed(base: Path, port: int) -> RoostProcess:
    """A Roost on a fixed AMQP port, the same after a restart (the later flag wins)."""
    server = RoostProcess(base, "--amqp-port", str(port)).start()
    server.amqp_port = port
    return server


def test_on_confirm_link_survives_kill_9_of_the_downstream(tmp_path: Path) -> None:
    """The downstream (where the link runs) is killed with SIGKILL mid-way through 15,000
    persistent messages and started again on the same AMQP port: its link comes back by
    itself (policy and upstream are journaled), every message arrives at least once, and
    the upstream's federation queue ends empty."""
    port = free_port()
    a = RoostProcess(tmp_path / "a").start()
    b = fixed(tmp_path / "b", port)
    try:
        x, q = unique("fed.k"), unique("q")
        for server in (a, b):
            conn, ch = channel(server.url)
            with conn:
                ch.exchange_declare(x, "fanout", durable=True)
        conn, ch = channel(b.url)
        with conn:
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, x, "")
        federate(b, "k", {"uri": a.url, "reconnect-delay": 1, "prefetch-count": 200}, f"^{x}$")
        eventually(lambda: upstream_bindings(a, x) == {""}, what=lambda: links(b))
        bodies = [f"k{i}".encode() * 8 for i in range(15_000)]
        conn, ch = channel(a.url)
        with conn:
            for body in bodies:
                ch.basic_publish(x, "", body, pika.BasicProperties(delivery_mode=2))

        def depth() -> int:
            conn, ch = channel(b.url)
            with conn:
                return int(ch.queue_declare(q, passive=True).method.message_count)

        def upstream_left() -> int:  # ready and unacked in A's federation queue
            with api(a) as c:
                rows = c.get("/queues/%2F").json()
            return sum(r.get("messages", 0) for r in rows if r["name"].endswith(f":{x}"))

        eventually(lambda: depth() >= 1500, timeout=20)
        b.kill()  # SIGKILL, mid-way
        assert eventually(upstream_left, what="A's federation queue was already empty")
        b = fixed(tmp_path / "b", port)
        arrived: set[bytes] = set()

        def covered() -> bool:
            arrived.update(body for _, body in take(b.url, q))
            return arrived >= set(bodies)

        eventually(covered, timeout=30, what=lambda: f"{len(set(bodies) - arrived)} lost")
        eventually(lambda: upstream_left() == 0, what=upstream_left)
    finally:
        a.kill()
        b.kill()
