"""A remote subscription's credit at the home node follows the prefetch of the consumers
it serves on the other node (``roost.cluster.home.credit_for``), and each consumer still
gets no more than its own prefetch: prefetch holds end to end."""

from __future__ import annotations

from pathlib import Path

import httpx

from roost.cluster.etcd_server import EtcdServer
from roost.cluster.home import CREDIT, CREDIT_PER_PREFETCH
from tests.cluster.conftest import node
from tests.cluster.nodes import channel
from tests.support import eventually

MESSAGES = 3000


def test_the_credit_of_a_remote_subscription_follows_its_consumers_prefetch(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    try:
        c1, ch1 = channel(n1)
        ch1.queue_declare("deep")
        ch1.confirm_delivery()
        for i in range(MESSAGES):
            ch1.basic_publish("", "deep", b"m%d" % i)

        def unacked_at_home() -> int:
            info = httpx.get(f"{n1.http_url}/api/queues/%2F/deep", auth=("guest", "guest"))
            return int(info.json()["messages_unacknowledged"])

        c2, ch_a = channel(n2)
        got = {"a": 0, "b": 0}
        ch_a.basic_qos(prefetch_count=10)
        ch_a.basic_consume("deep", lambda *a: got.__setitem__("a", got["a"] + 1))
        # prefetch 10: the least credit (a small prefetch still relays at a useful rate)
        eventually(lambda: unacked_at_home() == CREDIT, what=unacked_at_home)
        ch_b = c2.channel()
        ch_b.basic_qos(prefetch_count=100)
        ch_b.basic_consume("deep", lambda *a: got.__setitem__("b", got["b"] + 1))
        wanted = CREDIT_PER_PREFETCH * 110  # raised by a Credit frame
        eventually(lambda: unacked_at_home() == wanted, what=unacked_at_home)
        c2.process_data_events(0.5)
        assert got == {"a": 10, "b": 100}  # each consumer no more than its prefetch
        assert unacked_at_home() == wanted
        ok = ch1.queue_declare("deep", passive=True).method
        assert ok.message_count == MESSAGES - wanted
        c2.close()  # what n2 held goes back to the home node
        eventually(lambda: unacked_at_home() == 0, what=unacked_at_home)
        assert ch1.queue_declare("deep", passive=True).method.message_count == MESSAGES
        c1.close()
    finally:
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log
