"""Replicated streams on 3 real nodes and a real etcd: confirmed publishes survive kill -9
of the leader at the same offsets, and a member killed and started again catches up
(the history is checked offset by offset, not eyeballed)."""

from __future__ import annotations

import threading
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.nodes import queue_json, three_nodes
from tests.cluster.quorum_queues import confirm_in_background
from tests.cluster.streams import (
    STREAM,
    check,
    follower_reader,
    leader_of,
    online,
    publisher,
    read_all,
)
from tests.support import eventually


def test_a_replicated_stream_survives_kill_9_of_its_leader_at_the_same_offsets(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    nodes = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    by_name = {f"n{i}": n for i, n in enumerate(nodes, 1)}
    n1, n2, n3 = nodes
    confirmed: list[bytes] = []
    stop, done_reading = threading.Event(), threading.Event()
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("s", durable=True, arguments=STREAM)
        shown = queue_json(n2, "s")
        assert shown["type"] == "stream" and shown["leader"] == "n1", shown
        eventually(
            lambda: sorted(queue_json(n2, "s")["members"]) == ["n1", "n2", "n3"],  # type: ignore[arg-type]
            5,
        )
        eventually(
            lambda: online(n1, "s") == ["n1", "n2", "n3"],
            5,
        )
        # published on n2: forwarded to the leader n1, confirmed at a majority; read on n3
        thread = threading.Thread(target=publisher, args=(n2, "s", confirmed, stop))
        thread.start()
        # readers on both members: one is promoted with its consumer, one follows it
        remote: dict[str, list[tuple[int, bytes]]] = {"n2": [], "n3": []}
        readers = [
            threading.Thread(target=follower_reader, args=(n, "s", remote[name], done_reading))
            for name, n in (("n2", n2), ("n3", n3))
        ]
        for reader in readers:
            reader.start()
        eventually(lambda: len(confirmed) > 300, 30, "publishing never got going")
        before = read_all(n1, "s", 300, limit=300)  # the leader's offsets, before it dies
        # a named consumer's acks store its offset (99), kept on every member
        named = {"x-stream-consumer-name": "reader"}
        assert sorted(read_all(n1, "s", 100, limit=100, **named)) == list(range(100))
        n1.kill()  # kill -9 of the leader, mid-stream
        count = len(confirmed)
        eventually(lambda: len(confirmed) > count + 200, 30, "no failover")
        stop.set()
        thread.join(20)
        new = leader_of(n2, "s")
        assert new in ("n2", "n3")
        print(f"\nnew leader {new}")
        after = read_all(by_name[new], "s", len(confirmed))
        check(after, confirmed)
        assert all(after[o] == raw for o, raw in before.items()), "offsets moved"
        # the consumers on n2 and n3 went on through the failover: no gap, nothing twice
        for name, got in remote.items():
            eventually(lambda got=got: len(got) >= len(after), 20, f"{name}'s reader stalled")
        done_reading.set()
        for reader in readers:
            reader.join(20)
        for name, got in remote.items():
            assert [o for o, _r in got] == list(range(len(got))), f"{name}'s reader: gap or dup"
            assert all(after[o] == raw for o, raw in got), f"{name}'s reader: other messages"
        resumed = read_all(by_name[new], "s", 1, limit=1, **named, **{"x-stream-offset": "stored"})
        assert resumed == {100: before[100]}, resumed

        # the old leader comes back as a member and catches up; then the leader goes
        # again, and the third leader holds the same log, offset for offset
        n1.start()
        eventually(
            lambda: "n1" in queue_json(by_name[new], "s")["online"],  # type: ignore[operator]
            20,
            "n1 never caught up",
        )
        by_name[new].kill()
        survivor = next(n for n in ("n2", "n3") if n != new)
        eventually(lambda: leader_of(by_name[survivor], "s") != new, 30, "no second failover")
        third = leader_of(by_name[survivor], "s")
        again = read_all(by_name[third], "s", len(after))
        check(again, confirmed)
        assert again == after, "the third leader's offsets differ"
    finally:
        stop.set()
        done_reading.set()
        for n in nodes:
            n.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def test_a_stream_publish_is_confirmed_and_read_only_once_a_majority_holds_it(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    """The leader alone (1 of 3) neither confirms nor shows a publish; a member started
    again catches up (its copy taken from the leader) and the publish is confirmed."""
    n1, n2, n3 = three_nodes(shared_etcd, etcd_prefix, tmp_path)
    try:
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            ch = conn.channel()
            ch.queue_declare("maj", durable=True, arguments={**STREAM, "x-initial-cluster-size": 3})
            ch.confirm_delivery()
            for i in range(20):
                ch.basic_publish("", "maj", f"early{i}".encode())
        n2.kill()
        n3.kill()
        n1.wait_for_log("link with n3 down")
        t, outcome = confirm_in_background(n1, "maj", b"needs-two-disks", 2)
        assert not outcome, "confirmed with one member of three holding it"
        seen = read_all(n1, "maj", 20)
        assert sorted(seen) == list(range(20)), "an uncommitted message was read"
        assert queue_json(n1, "maj")["messages"] == 20  # the committed ones
        n2.start()  # a member comes back: it catches up from the leader
        t.join(20)
        assert outcome == ["confirmed"], n1.log[-1500:]
        assert read_all(n1, "maj", 21)[20] == b"needs-two-disks"
        shown = queue_json(n1, "maj")
        assert sorted(shown["online"]) == ["n1", "n2"], shown  # type: ignore[arg-type]
        assert sorted(shown["members"]) == ["n1", "n2", "n3"], shown  # type: ignore[arg-type]
    finally:
        for n in (n1, n2, n3):
            n.kill()
    assert "Traceback" not in n1.log, n1.log
