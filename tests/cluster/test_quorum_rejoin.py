"""A quorum queue a restarted node recovered from its disk is held (publishes refused)
until the node has read the queue's group from etcd. If etcd does not answer then, the
node asks again until it does: the hold ends once etcd is back, not at the next restart.

In process, with a real etcd killed and started again and a real cluster node."""

from __future__ import annotations

import asyncio

from roost.cluster.etcd_server import EtcdServer
from roost.cluster.node import ClusterNode, ClusterSettings
from roost.cluster.quorum.manager import Rejoining
from roost.core.broker import Broker, Message, Properties
from roost.core.queues.quorum import QuorumQueue
from roost.core.settings import BrokerSettings
from roost.store.memory import MemoryStore
from roost.store.memory_streams import MemoryStreams
from tests.support import free_port


def test_a_held_queue_rejoins_once_etcd_answers_again(etcd: EtcdServer) -> None:
    async def scenario() -> None:
        broker = Broker(BrokerSettings(), store=MemoryStore(), stream_storage=MemoryStreams())
        broker.catalog.add_vhost("/")
        vhost = broker.vhosts["/"]
        queue = vhost.declare_queue("qq", durable=True, arguments={"x-queue-type": "quorum"})
        assert isinstance(queue, QuorumQueue)
        node = ClusterNode(
            ClusterSettings(
                url=etcd.url("/r"),
                node_name="n1",
                bind="127.0.0.1",
                cluster_port=free_port(),
                lease_ttl=30,
                data_dir=None,
                timeout=1.0,
            )
        )
        await node.join()
        await node.serve(broker)
        try:
            loop = asyncio.get_running_loop()
            await _until(lambda: queue.replication is None)  # one member: served here
            # as after a restart: recovered from disk, held until its group is known
            queue.replication = Rejoining(queue)
            etcd.kill()
            node.quorum._spawn(("/", "qq"), node.quorum._rejoin(queue))
            await asyncio.sleep(2.5)  # etcd's reads fail meanwhile (1 s timeout)
            assert isinstance(queue.replication, Rejoining)
            assert not queue.push(Message("", "qq", Properties(), b"x"))  # refused
            etcd.start()
            started = loop.time()
            await _until(lambda: queue.replication is None, 20)
            print(f"\nhold lifted {loop.time() - started:.1f} s after etcd started")
            assert queue.push(Message("", "qq", Properties(), b"y"))
        finally:
            if not etcd.running:
                etcd.start()
            await node.leave()

    asyncio.run(scenario())


async def _until(check: object, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)
