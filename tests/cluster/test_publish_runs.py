"""The home node's side of a Batch of forwarded publishes (``Home.publish_run``), sans-IO
over a broker on a real disk store: the confirms of a run wait for the store's fsync and
share one durability wait, while a refused or unroutable publish in the run is answered
alone and at once. The link is a list of the frames the home node sent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from roost.amqp.codec import encode_properties
from roost.cluster.home import Home
from roost.cluster.link import frames as f
from roost.core.broker import Broker
from roost.core.message import Properties
from roost.core.persistence import Persistence
from roost.store.hub import DiskStore
from roost.store.memory import MemoryDefinitions
from tests.brokers import memory_broker

PERSISTENT = encode_properties(Properties(delivery_mode=2))


class SentFrames:
    """What ``Home`` needs of a ``Link``: its peer's name and ``send``."""

    peer = "n2"

    def __init__(self) -> None:
        self.frames: list[f.Frame] = []

    def send(self, frame: f.Frame) -> bool:
        self.frames.append(frame)
        return True

    def answers(self) -> dict[int, f.Outcome]:
        found: dict[int, f.Outcome] = {}
        for frame in self.frames:
            if isinstance(frame, f.Confirmed):
                found.update(dict.fromkeys(f.unpack_ids(frame.ids), f.Outcome.CONFIRMED))
            elif isinstance(frame, f.PublishResult):
                found[frame.publish_id] = frame.outcome
        return found


def publish(pid: int, queue: str, props: bytes = PERSISTENT) -> f.Publish:
    return f.Publish(pid, f.PUBLISH_CONFIRM, "/", [queue], "", queue, props, b"m%d" % pid)


def on_disk(store: DiskStore) -> Broker:
    """A broker whose durable queues keep persistent messages in ``store``."""
    broker = memory_broker(store=store)
    Persistence(broker, store, MemoryDefinitions()).install()
    return broker


def test_a_runs_confirms_wait_for_the_fsync_in_one_wait(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = DiskStore(tmp_path, fsync="always")
        store.start(asyncio.get_running_loop())
        waits: list[Callable[[bool], None]] = []
        store.when_durable = waits.append  # type: ignore[method-assign]  # held here
        broker = on_disk(store)
        vhost = broker.catalog.vhosts["/"]
        vhost.declare_queue("q", durable=True)
        vhost.declare_queue(
            "full", durable=True, arguments={"x-max-length": 0, "x-overflow": "reject-publish"}
        )
        home, link = Home(broker), SentFrames()

        run = [publish(i, "q") for i in range(1, 51)]
        run[10] = publish(11, "full")
        run[20] = publish(21, "gone")
        home.publish_run(link, run)  # type: ignore[arg-type]
        await asyncio.sleep(0)  # the turn the confirms of the moment would go in

        assert link.answers() == {11: f.Outcome.NACKED, 21: f.Outcome.UNROUTABLE}
        assert len(waits) == 1, "one durability wait for the run, not one a publish"
        assert vhost.queues["q"].message_count == 48
        waits[0](True)  # the fsync returned
        await asyncio.sleep(0)
        answers = link.answers()
        assert sorted(answers) == list(range(1, 51))
        assert [p for p, o in answers.items() if o != f.Outcome.CONFIRMED] == [11, 21]
        confirmed = [fr for fr in link.frames if isinstance(fr, f.Confirmed)]
        assert len(confirmed) == 1 and list(f.unpack_ids(confirmed[0].ids)) == [
            i for i in range(1, 51) if i not in (11, 21)
        ]
        await store.close()

    asyncio.run(scenario())


def test_a_run_of_transient_publishes_confirms_in_the_same_turn(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = DiskStore(tmp_path, fsync="always")
        store.start(asyncio.get_running_loop())
        broker = on_disk(store)
        broker.catalog.vhosts["/"].declare_queue("t")
        home, link = Home(broker), SentFrames()
        home.publish_run(link, [publish(i, "t", b"\x00\x00") for i in range(1, 4)])  # type: ignore[arg-type]
        await asyncio.sleep(0)
        assert link.answers() == dict.fromkeys([1, 2, 3], f.Outcome.CONFIRMED)
        await store.close()

    asyncio.run(scenario())
