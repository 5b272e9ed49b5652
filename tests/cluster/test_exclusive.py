"""An exclusive queue belongs to its connection wherever it is used from: a client on
another node gets 405 RESOURCE_LOCKED (declare, passive declare, consume, get), as on
one RabbitMQ node and across a RabbitMQ cluster; publishing to it from there still
routes to it; once its connection closes, the name is free on every node."""

from __future__ import annotations

from pathlib import Path

from roost.cluster.etcd_server import EtcdServer
from tests.cluster.conftest import node
from tests.cluster.nodes import channel, refused
from tests.support import eventually


def test_another_nodes_client_gets_405_for_an_exclusive_queue(
    shared_etcd: EtcdServer, etcd_prefix: str, tmp_path: Path
) -> None:
    n1 = node(shared_etcd, tmp_path / "n1", "n1", prefix=etcd_prefix).start()
    n2 = node(shared_etcd, tmp_path / "n2", "n2", prefix=etcd_prefix).start()
    try:
        c1, ch1 = channel(n1)
        c2, ch2 = channel(n2)
        ch1.queue_declare("owned", exclusive=True)
        ch1.queue_bind("owned", "amq.direct", "k")
        assert refused(ch2.queue_declare, "owned", passive=True) == 405
        ch2 = c2.channel()
        assert refused(ch2.queue_declare, "owned", exclusive=True) == 405
        ch2 = c2.channel()
        assert refused(ch2.queue_declare, "owned") == 405
        ch2 = c2.channel()
        assert refused(ch2.basic_get, "owned") == 405
        ch2 = c2.channel()
        assert refused(ch2.basic_consume, "owned", lambda *a: None) == 405
        ch2 = c2.channel()
        # publishing to it from the other node routes to it (default and bound exchange)
        ch2.confirm_delivery()
        ch2.basic_publish("", "owned", b"by name")
        ch2.basic_publish("amq.direct", "k", b"by binding")
        bodies = []
        for _ in range(2):
            got = eventually(lambda: ch1.basic_get("owned", auto_ack=True)[2])
            bodies.append(got)
        assert sorted(bodies) == [b"by binding", b"by name"]
        c1.close()  # the queue goes with its connection, on every node (soon after)

        def declared_on_n2() -> bool:
            ch = c2.channel()
            return refused(ch.queue_declare, "owned", exclusive=True) == 0  # n2's own now

        assert eventually(declared_on_n2)
        c1, ch1 = channel(n1)
        assert refused(ch1.queue_declare, "owned", passive=True) == 405
        c1.close()
        c2.close()
    finally:
        n1.kill()
        n2.kill()
    for n in (n1, n2):
        assert "Traceback" not in n.log, n.log
