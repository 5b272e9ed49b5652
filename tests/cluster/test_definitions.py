"""Definitions live in etcd: what one node declares, binds, deletes or PUTs over HTTP is
seen by the others as soon as the reply arrives, and two nodes racing to declare one
queue (or exchange) with different arguments give exactly one 406."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.nodes import channel, etcd_keys, pair, refused  # noqa: F401  (pair: the fixture)
from tests.support import RoostProcess, eventually


def test_a_declare_on_one_node_is_seen_by_the_other_when_declare_ok_arrives(
    pair: tuple[RoostProcess, RoostProcess],  # noqa: F811
    shared_etcd: EtcdServer,
    etcd_prefix: str,
) -> None:
    n1, n2 = pair
    c1, ch1 = channel(n1)
    c2, ch2 = channel(n2)
    with c1, c2:
        ch1.exchange_declare("ex", "topic", durable=True)
        ch1.queue_declare("q", durable=True, arguments={"x-max-length": 10})
        # no sleep: the reply waited for etcd and for n2 to apply it
        ch2.exchange_declare("ex", "topic", durable=True, passive=True)
        ch2.queue_declare("q", durable=True, passive=True)
        ch2.queue_bind("q", "ex", "a.#")
        ch1.confirm_delivery()
        ch1.basic_publish("ex", "a.b", b"routed by n2's binding, on n1")
        assert ch2.queue_declare("q", passive=True).method.message_count == 1  # from n1
        assert ch1.queue_declare("q", passive=True).method.message_count == 1
        # an inequivalent redeclare on the other node: 406, as on one node
        assert refused(ch2.queue_declare, "q", durable=True) == 406
        ch2 = c2.channel()
        assert refused(ch2.exchange_declare, "ex", "direct", durable=True) == 406
        ch2 = c2.channel()
        # the definitions are etcd keys, the queue's with its home node
        keys = etcd_keys(shared_etcd, f"{etcd_prefix}/defs/")
        queue_key = f"{etcd_prefix}/defs/queues/%2F/q"
        assert queue_key in keys and f"{etcd_prefix}/defs/exchanges/%2F/ex" in keys
        assert keys[queue_key]["node"] == "n1"
        assert any(k.startswith(f"{etcd_prefix}/defs/bindings/%2F/ex/queue/q/") for k in keys)
        # read-your-writes across nodes, many times over: each declare-ok waited for n2
        for i in range(40):
            ch1.queue_declare(f"ryw-{i}", auto_delete=False)
            ch2.queue_declare(f"ryw-{i}", passive=True)
            ch2.queue_delete(f"ryw-{i}")
            assert refused(ch1.queue_declare, f"ryw-{i}", passive=True) == 404
            ch1 = c1.channel()
        # an exclusive queue is in etcd, marked, while its connection lives: other nodes
        # lock it (405, tests/cluster/test_exclusive.py); its home is its connection's node
        excl = ch1.queue_declare("", exclusive=True).method.queue
        ch1.queue_bind(excl, "ex", "x.#")
        keys = etcd_keys(shared_etcd, f"{etcd_prefix}/defs/")
        assert keys[f"{etcd_prefix}/defs/queues/%2F/{excl}"]["node"] == "n1"
        assert keys[f"{etcd_prefix}/defs/queues/%2F/{excl}"]["item"]["exclusive"] is True
        # a delete on n2 deletes it everywhere
        ch2.queue_delete("q")
        assert refused(ch1.queue_declare, "q", passive=True) == 404
        assert f"{etcd_prefix}/defs/queues/%2F/q" not in etcd_keys(
            shared_etcd, f"{etcd_prefix}/defs/"
        )


def test_http_definitions_reach_every_node(pair: tuple[RoostProcess, RoostProcess]) -> None:  # noqa: F811
    n1, n2 = pair
    auth = ("guest", "guest")
    with httpx.Client(auth=auth, timeout=10) as http:
        r = http.put(f"{n1.http_url}/api/users/alice", json={"password": "s3cret", "tags": ""})
        assert r.status_code in (201, 204)
        r = http.put(
            f"{n1.http_url}/api/permissions/%2F/alice",
            json={"configure": "^alice-.*", "write": ".*", "read": ".*"},
        )
        assert r.status_code in (201, 204)
        r = http.put(
            f"{n1.http_url}/api/policies/%2F/short",
            json={"pattern": "^short-", "definition": {"max-length": 5}, "apply-to": "queues"},
        )
        assert r.status_code in (201, 204)
        r = http.put(f"{n1.http_url}/api/vhosts/second", json={})
        assert r.status_code in (201, 204)
        # n2 knows them as soon as n1 answered
        assert http.get(f"{n2.http_url}/api/users/alice").status_code == 200
        assert http.get(f"{n2.http_url}/api/policies/%2F/short").json()["definition"] == {
            "max-length": 5
        }
        assert http.get(f"{n2.http_url}/api/vhosts/second").status_code == 200
    conn, ch = channel(n2, "alice", "s3cret")  # authenticates on the other node
    with conn:
        ch.queue_declare("alice-q")  # her configure permission, as granted on n1
        assert refused(ch.queue_declare, "bob-q") == 403
    with httpx.Client(auth=auth, timeout=10) as http:
        assert http.delete(f"{n2.http_url}/api/users/alice").status_code == 204
        assert http.get(f"{n1.http_url}/api/users/alice").status_code == 404


def test_two_nodes_racing_to_declare_a_queue_differently_get_one_406(
    pair: tuple[RoostProcess, RoostProcess],  # noqa: F811
) -> None:
    n1, n2 = pair
    rounds = 15
    codes: dict[tuple[str, int], int] = {}
    barrier = threading.Barrier(2)

    def racer(server: RoostProcess, name: str, ttl: int) -> None:
        conn, _ch = channel(server)
        with conn:
            for i in range(rounds):
                ch = conn.channel()
                barrier.wait(10)
                codes[(name, i)] = refused(
                    ch.queue_declare, f"race-{i}", durable=True, arguments={"x-message-ttl": ttl}
                )

    threads = [
        threading.Thread(target=racer, args=(n1, "n1", 1000)),
        threading.Thread(target=racer, args=(n2, "n2", 2000)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    c1, ch1 = channel(n1)
    c2, ch2 = channel(n2)
    with c1, c2:
        for i in range(rounds):
            pair_codes = sorted((codes[("n1", i)], codes[("n2", i)]))
            assert pair_codes == [0, 406], (i, codes)
            winner = 1000 if codes[("n1", i)] == 0 else 2000
            loser = 3000 - winner
            # both nodes agree on the winner's arguments afterwards
            for conn, ch in ((c1, ch1), (c2, ch2)):
                ch = conn.channel()
                ch.queue_declare(f"race-{i}", durable=True, arguments={"x-message-ttl": winner})
                ch = conn.channel()
                args = {"x-message-ttl": loser}
                assert refused(ch.queue_declare, f"race-{i}", durable=True, arguments=args) == 406


def test_a_declare_while_etcd_is_unreachable_fails_and_changes_nothing(
    etcd: EtcdServer, tmp_path: Path
) -> None:
    n1 = node(etcd, tmp_path / "n1", "n1").start()
    try:
        conn, ch = channel(n1)
        with conn:
            ch.queue_declare("before", durable=True)
            ch.confirm_delivery()
            etcd.kill()
            # a definition change cannot be recorded: the caller is told, nothing changes
            try:
                ch.queue_declare("during", durable=True)
            except pika.exceptions.ChannelClosedByBroker as exc:
                assert exc.reply_code == 541, exc
            else:
                raise AssertionError("a declare succeeded while etcd was down")
            ch = conn.channel()
            assert refused(ch.queue_declare, "during", passive=True) == 404
            ch = conn.channel()
            ch.confirm_delivery()
            # messages keep flowing on the queues that exist
            ch.basic_publish("", "before", b"kept", pika.BasicProperties(delivery_mode=2))
            assert ch.queue_declare("before", passive=True).method.message_count == 1
            etcd.start()

            def declared() -> bool:  # etcd back: declares work again once it answers
                try:
                    conn.channel().queue_declare("during", durable=True)
                except pika.exceptions.ChannelClosedByBroker as exc:
                    assert exc.reply_code == 541
                    return False
                return True

            eventually(declared, 15, "declares did not work again after etcd came back")
    finally:
        n1.kill()
    assert "Traceback" not in n1.log, n1.log
