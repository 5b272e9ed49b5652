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
delivered."""

from __future__ import annotations

import os
import signal
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


def test_a_deposed_leaders_copy_survives_its_queue_turning_into_a_stand_in(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    proxy = Proxy(shared_etcd.host, shared_etcd.client_port)
    n1 = RoostProcess(
        tmp_path / "n1", "--cluster", f"etcd://127.0.0.1:{proxy.port}{etcd_prefix}",
        "--node-name", "n1", "--cluster-port", str(free_port()), *TTL,
    )  # fmt: skip
    nodes = [n1]
    h = History()
    try:
        n1.start()
        for name in ("n2", "n3"):
            nodes.append(node(shared_etcd, tmp_path / name, name, *TTL, prefix=etcd_prefix))
            nodes[-1].start()
        _n1, n2, n3 = nodes
        for other in ("n2", "n3"):
            n1.wait_for_log(f"node '{other}' is up")
            n1.wait_for_log(f"link with {other} up")
        n2.wait_for_log("link with n3 up")
        with pika.BlockingConnection(pika.URLParameters(n1.url)) as conn:
            conn.channel().queue_declare("work", durable=True, arguments=QUORUM)
        confirmed(n1, h, "a", 100)  # n1's term, held by all three

        os.kill(proxy.process.pid, signal.SIGSTOP)  # n1 no longer reaches etcd
        new = str(eventually(lambda: (now := own_leader(n2, "work")) in ("n2", "n3") and now, 30))
        leader, paused = (n2, n3) if new == "n2" else (n3, n2)
        # n1 holds the new leader's snapshot: a member of its term, still cut off
        eventually(
            lambda: "n1" in queue_json(leader, "work")["online"],  # type: ignore[operator]
            30,
            "n1 never followed the new leader",
        )
        record = queue_dir(n1.data_dir, "/", "work") / MEMBER_FILE
        assert read_member(record)[0] is not None
        assert paused.proc is not None
        os.kill(paused.proc.pid, signal.SIGSTOP)  # the new leader commits with n1 alone
        confirmed(leader, h, "b", 100)
        leader.kill()

        os.kill(proxy.process.pid, signal.SIGCONT)  # n1 registers again, reads the change
        n1.wait_for_log("registered again as 'n1'", 30)
        eventually(lambda: own_leader(n1, "work") == new, 30, "n1's queue never became a stand-in")
        state, named = read_member(record)
        assert state is not None, "n1's member copy went with the queue it had led"
        assert sum(1 for _seq, covered in named.values() if covered) >= 200, state

        paused.kill()  # the third member, behind: killed and started again
        paused.start()
        eventually(
            lambda: queue_json(paused, "work")["leader"] == "n1",
            60,
            lambda: f"n1 (the only copy of b) does not lead: {queue_json(paused, 'work')}",
        )
        consume_rest(n1, "work", h)
        assert h.problems() == [], h.problems()
    finally:
        for n in nodes:
            if n.proc is not None and n.proc.poll() is None:
                os.kill(n.proc.pid, signal.SIGCONT)
            n.kill()
        os.kill(proxy.process.pid, signal.SIGCONT)
        proxy.kill()
    for n in nodes:
        assert "Traceback" not in n.log, n.log
