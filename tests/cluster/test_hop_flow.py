"""Flow control across the hop, per queue: a publisher on one node that never waits is
held when the queue it feeds on another node is congested (the queue's backlog stays
bounded), and a congested queue holds no other queue's publishers on that node (a
publisher to another queue homed on the same node still gets its messages through).

Confirms across the hop (a confirm waits for its own queues only) are
test_confirm_order.py's.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from roost.cluster.etcd_server import EtcdServer
from roost.core.flow import HIGH_MESSAGES
from tests.cluster.conftest import node
from tests.cluster.flood import FLOOD_SCRIPT, slow_consumer
from tests.cluster.nodes import channel
from tests.support import eventually

FLOOD = 4 * HIGH_MESSAGES


FAST = 5_000  # more than one socket read: a held publisher would stop part way


def test_a_congested_queue_holds_its_publisher_on_another_node_and_no_other(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    stop = threading.Event()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        c1, ch1 = channel(n1)
        ch1.queue_declare("slow")
        ch1.queue_declare("fast")
        consumer = threading.Thread(target=slow_consumer, args=(n1, stop), daemon=True)
        consumer.start()
        flood = [sys.executable, "-c", FLOOD_SCRIPT, n2.url]
        flooder = subprocess.Popen([*flood, "slow", str(FLOOD)])
        procs.append(flooder)

        def ready() -> int:
            return int(ch1.queue_declare("slow", passive=True).method.message_count)

        eventually(lambda: ready() >= HIGH_MESSAGES, timeout=30, what=ready)  # congested
        # another queue homed on n1, fed from n2 too: its publisher is not held
        other = subprocess.Popen([*flood, "fast", str(FAST)])
        procs.append(other)

        def fast() -> int:
            return int(ch1.queue_declare("fast", passive=True).method.message_count)

        eventually(lambda: fast() == FAST, timeout=15, what=fast)
        assert other.wait(10) == 0
        # the flood is held: the backlog stays near the high mark (the window of
        # publishes forwarded and not yet answered is 2,000), far below what was meant
        assert flooder.poll() is None and ready() < HIGH_MESSAGES + 3_000, ready()
        c1.close()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        stop.set()
        consumer.join(5)
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log
