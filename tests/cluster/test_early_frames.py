"""A node's links come up while it joins, before it serves (reads the definitions, starts
the data plane): what a peer sends in that window is handled once it serves, not lost.
Otherwise a publish forwarded to a restarting queue's home is never answered and its
publisher waits for the confirm for as long as the link lives.

In process, with a real etcd and real links on loopback: the peer is a bare link
manager, so the frame is sure to arrive before ``serve``."""

from __future__ import annotations

import asyncio

from roost.cluster.etcd_server import EtcdServer
from roost.cluster.link import frames as f
from roost.cluster.link.transport import Link, LinkManager, Peer
from roost.cluster.node import ClusterNode, ClusterSettings
from roost.cluster.wire import properties_of
from roost.core.broker import Broker, Message, Properties
from roost.core.settings import BrokerSettings
from roost.store.memory import MemoryStore
from roost.store.memory_streams import MemoryStreams
from tests.support import free_port


async def _until(check: object, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_a_publish_forwarded_before_the_node_serves_is_answered(
    shared_etcd: EtcdServer, etcd_prefix: str
) -> None:
    async def scenario() -> None:
        broker = Broker(BrokerSettings(), store=MemoryStore(), stream_storage=MemoryStreams())
        broker.catalog.add_vhost("/")
        broker.vhosts["/"].declare_queue("q", durable=True)
        port = free_port()
        node = ClusterNode(
            ClusterSettings(
                url=shared_etcd.url(etcd_prefix),
                node_name="n2",
                bind="127.0.0.1",
                cluster_port=port,
                lease_ttl=5,
                data_dir=None,
            )
        )
        answers: list[f.Frame] = []
        peer = LinkManager(
            "n1",
            on_frame=lambda link, frame: answers.append(frame),  # "n1" dials "n2"
        )
        try:
            await node.join()
            peer.set_peers([Peer("n2", "127.0.0.1", port)])
            await _until(lambda: peer.link("n2") is not None and node.links.link("n1"))
            link: Link | None = peer.link("n2")
            assert link is not None
            message = Message("", "q", Properties(delivery_mode=2), b"early")
            link.send(
                f.Publish(
                    7, f.PUBLISH_CONFIRM, "/", ["q"], "", "q", properties_of(message), b"early"
                )
            )
            arrived = node.links.links["n1"]
            # the first frame after Hello (a heartbeat comes only after a second of quiet)
            await _until(lambda: arrived.frames_in >= 1)
            assert answers == []
            await node.serve(broker)
            await _until(lambda: any(not isinstance(a, f.Applied) for a in answers))
            results = [a for a in answers if isinstance(a, f.PublishResult | f.Confirmed)]
            assert results == [f.PublishResult(7, f.Outcome.CONFIRMED)], answers
            assert broker.vhosts["/"].queues["q"].message_count == 1
        finally:
            await peer.close()
            await node.leave()

    asyncio.run(scenario())
