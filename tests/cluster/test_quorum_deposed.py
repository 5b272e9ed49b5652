"""A quorum queue's leader deposed while its queue is still led here, on 3 real nodes and
a real etcd. n1 leads; it is cut off from etcd, and only from etcd (through a forwarder
of its own, stopped with SIGSTOP: ``tcp_proxy.py``), so its lease expires and another
member is elected, whose first batch reaches n1 over the link that never went down: n1
follows at once, its member copy in the directory of the queue it led, while its
definitions still say it leads. The third member is paused, so the new leader commits
with n1 alone. Then the new leader is killed and n1 reaches etcd again: its definitions'
watch replaces its queue with a stand-in, which deleted the directory under the member
copy before (its segments and member record: confirmed messages lost, on a node still
counted as holding them). The paused member is killed and started again: it and n1 must
elect n1, which holds everything, and the history checker finds every confirmed message
delivered.

A sibling: n1, deposed and following, is killed (kill -9) before its definitions' watch
replaced its queue. Restarted, its definitions still hold the queue it led, recreated
over the member copy's directory, and etcd's then replace it with a stand-in: that swap
deleted the directory before, so n1 came back as one that forgot, the one copy of what
the new leader committed with n1 alone gone once that leader dies too."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pika

from roost.cluster.etcd_server import EtcdServer
from roost.store.member_log import MEMBER_FILE, read_member
from roost.store.paths import queue_dir
from tests.cluster.conftest import node
from tests.cluster.history import History
from tests.cluster.nodes import TTL, queue_json
from tests.cluster.quorum_queues import QUORUM, own_leader
from tests.cluster.tcp_proxy import Proxy
from tests.cluster.test_quorum_full_restart import consume_rest
from tests.confirming import publish_recorded
from tests.support import RoostProcess, eventually, free_port


def confirmed(server: RoostProcess, h: History, name: str, count: int) -> None:
    """``count`` persistent messages published through ``server``, each confirmed."""
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for seq in range(count):
            publish_recorded(ch, h, name, "work", seq, 256)
    assert sum(1 for p, _s in h.confirmed if p == name) == count, h.nacked


def online(server: RoostProcess, queue: str) -> list[str]:
    """The members ``server`` (the leader) shows up and in sync."""
    shown = queue_json(server, queue)["online"]
    assert isinstance(shown, list)
    return sorted(shown)


@contextlib.contextmanager
def n1_behind_a_proxy(
    etcd: EtcdServer, prefix: str, tmp_path: Path
) -> Iterator[tuple[Proxy, list[RoostProcess]]]:
    """n1, n2, n3 up and linked, n1 reaching etcd through a forwarder of its own."""
    proxy = Proxy(etcd.host, etcd.client_port)
    n1 = RoostProcess(
        tmp_path / "n1", "--cluster", f"etcd://127.0.0.1:{proxy.port}{prefix}",
        "--node-name", "n1", "--cluster-port", str(free_port()), *TTL,
    )  # fmt: skip
    nodes = [n1]
    try:
        n1.start()
        for name in ("n2", "n3"):
            nodes.append(node(etcd, tmp_path / name, name, *TTL, prefix=prefix))
            nodes[-1].start()
        for other in ("n2", "n3"):
            n1.wait_for_log(f"node '{other}' is up")
            n1.wait_for_log(f"link with {other} up")
        nodes[1].wait_for_log("link with n3 up")
        yield proxy, nodes
    finally:
        for n in nodes:
            if n.proc is not None and n.proc.poll() is None:
                os.kill(n.proc.pid, signal.SIGCONT)
            n.kill()
        os.kill(proxy.process.pid, signal.SIGCONT)
        proxy.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log


def deposed_and_following(
    proxy: Proxy, nodes: list[RoostProcess], h: History
) -> tuple[str, RoostProcess, RoostProcess, Path]:
    """n1 leads 100 confirmed messages; cut off from etcd, it is succeeded and follows the
    new leader, whose 100 more are confirmed with n1 alone (the third member paused).
    (the new leader's name, the new leader, the paused member, n1's member record)."""
    n1, n2, n3 = nodes
    with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
        conn.channel().queue_declare("work", durable=True, arguments=QUORUM)
    confirmed(n1, h, "a", 100)  # n1's term, held by all three

    os.kill(proxy.process.pid, signal.SIGSTOP)  # n1 no longer reaches etcd
    new = str(eventually(lambda: (now := own_leader(n2, "work")) in ("n2", "n3") and now, 30))
    leader, paused = (n2, n3) if new == "n2" else (n3, n2)
    # both hold the new leader's snapshot: n1 a member of its term, still cut off
    eventually(
        lambda: online(leader, "work") == ["n1", "n2", "n3"],
        30,
        "n1 never followed the new leader",
    )
    record = queue_dir(n1.data_dir, "/", "work") / MEMBER_FILE
    assert read_member(record)[0] is not None
    assert paused.proc is not None
    os.kill(paused.proc.pid, signal.SIGSTOP)  # the new leader commits with n1 alone
    confirmed(leader, h, "b", 100)
    return new, leader, paused, record


def n1_elected_with_everything(n1: RoostProcess, paused: RoostProcess, h: History) -> None:
    """The paused member, behind, is killed and started again: with n1 it must elect n1,
    the only copy of b, and every confirmed message is delivered."""
    paused.kill()
    paused.start()
    eventually(
        lambda: queue_json(paused, "work")["leader"] == "n1",
        60,
        lambda: f"n1 (the only copy of b) does not lead: {queue_json(paused, 'work')}",
    )
    consume_rest(n1, "work", h)
    assert h.problems() == [], h.problems()


def test_a_deposed_leaders_copy_survives_its_queue_turning_into_a_stand_in(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    h = History()
    with n1_behind_a_proxy(shared_etcd, etcd_prefix, tmp_path) as (proxy, nodes):
        n1 = nodes[0]
        new, leader, paused, record = deposed_and_following(proxy, nodes, h)
        leader.kill()
        os.kill(proxy.process.pid, signal.SIGCONT)  # n1 registers again, reads the change
        n1.wait_for_log("registered again as 'n1'", 30)
        eventually(lambda: own_leader(n1, "work") == new, 30, "n1's queue never became a stand-in")
        state, named = read_member(record)
        assert state is not None, "n1's member copy went with the queue it had led"
        assert sum(1 for _seq, covered in named.values() if covered) >= 200, state
        n1_elected_with_everything(n1, paused, h)


def test_a_deposed_leader_killed_before_its_stand_in_keeps_its_copy(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    h = History()
    with n1_behind_a_proxy(shared_etcd, etcd_prefix, tmp_path) as (proxy, nodes):
        n1 = nodes[0]
        new, leader, paused, record = deposed_and_following(proxy, nodes, h)
        n1.kill()  # its definitions' watch (cut off from etcd) never replaced its queue
        leader.kill()  # n1 gets no snapshot from it again: its own copy is all it has
        os.kill(proxy.process.pid, signal.SIGCONT)
        n1.start()  # its definitions: the queue it led; etcd's: a stand-in for ``new``
        eventually(lambda: own_leader(n1, "work") == new, 30, "n1's queue never became a stand-in")
        state, named = read_member(record)
        assert state is not None, "n1's member copy went with the queue it led, at its restart"
        assert sum(1 for _seq, covered in named.values() if covered) >= 200, state
        n1.wait_for_log("member copy kept (200 messages")
        n1_elected_with_everything(n1, paused, h)
