"""roost/backpressure.py without sockets: a fake connection with frames waiting in its
buffer, a real event loop and a real core (queues, publishers, alarms)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from roost import backpressure
from roost.backpressure import ReadGate
from roost.core.broker import Broker
from roost.core.message import Message, Properties
from tests.brokers import memory_broker


class FakeConnection:
    """Frames are callables waiting in ``buffer``; the socket is ``reading``."""

    def __init__(self) -> None:
        self.gate = ReadGate(self, asyncio.get_running_loop())
        self.buffer: list[Callable[[], None]] = []
        self.reading = True
        self.handled = 0
        self.unacked = 0
        self.blocked: list[frozenset[str]] = []

    def feed(self, frames: list[Callable[[], None]]) -> None:
        self.buffer += frames
        self.work()

    def pause_reading(self) -> None:
        assert self.reading
        self.reading = False

    def resume_reading(self) -> None:
        assert not self.reading
        self.reading = True

    def work(self) -> None:
        gate = self.gate
        while gate.open and self.buffer:
            self.buffer.pop(0)()
            self.handled += 1
            gate.left -= 1
            if not gate.left:
                gate.end_turn()

    def owes_acks(self) -> bool:
        return self.unacked > 0

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        self.blocked.append(alarms)

    def alarm_unblocked(self) -> None:
        self.blocked.append(frozenset())


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


async def next_iteration() -> None:
    """One loop iteration: the callbacks scheduled so far run, then this task."""
    await asyncio.sleep(0)


def test_a_turn_is_bounded_and_the_rest_follows_on_later_iterations() -> None:
    async def main() -> None:
        conn = FakeConnection()
        n = backpressure.FRAMES_PER_TURN
        conn.feed([lambda: None] * (2 * n + 5))
        assert conn.handled == n and not conn.reading  # the socket waits meanwhile
        await next_iteration()
        assert conn.handled == 2 * n and not conn.reading
        await next_iteration()
        assert conn.handled == 2 * n + 5 and conn.reading
        assert not conn.gate.paused

    run(main)


def test_a_large_read_ends_the_turn_even_with_few_frames() -> None:
    async def main() -> None:
        conn = FakeConnection()
        conn.feed([lambda: None])
        conn.gate.read_done(backpressure.TURN_BYTES - 1)
        assert conn.reading
        conn.gate.read_done(backpressure.TURN_BYTES)
        assert not conn.reading and conn.gate.paused
        await next_iteration()
        assert conn.reading

    run(main)


def congested_queue(broker: Broker) -> Any:
    user = broker.authenticate("guest", "guest", peer_host="127.0.0.1")
    client = broker.connect(user, "/", protocol="test", peer="127.0.0.1:1")
    queue = broker.declare_queue(client, "q")
    queue.flow.high_messages, queue.flow.low_messages = 3, 1
    session = broker.open_session(client, Sink())
    session.prefetch_count = 1  # takes the first message, never acks it
    broker.consume(session, "q", "c", no_ack=False, exclusive=False)
    return client, queue


class Sink:
    def deliver(self, *args: Any) -> None:
        pass

    def consumer_cancelled(self, consumer_tag: str) -> None:
        pass

    def close_with(self, error: Any) -> None:
        pass


def test_congestion_pauses_after_the_publish_that_filled_the_queue() -> None:
    async def main() -> None:
        broker = memory_broker()
        client, queue = congested_queue(broker)
        conn = FakeConnection()
        conn.gate.client = client
        publisher = conn.gate.publisher(broker)

        def publish() -> None:
            broker.publish(client, "", Message("", "q", Properties(), b"x"), publisher=publisher)

        conn.feed([publish] * 10)
        # the consumer took one; the fourth publish congested the queue (3 ready):
        # nothing after it was handled
        assert conn.handled == 4 and len(queue.ready) == 3
        assert not conn.reading and conn.gate.flow_held and client.flow_held
        # a connection that owes acks is never held by congestion
        conn.unacked = 1
        conn.gate.update_congestion()
        assert not conn.gate.flow_held and not client.flow_held
        await next_iteration()
        assert conn.handled == 10 and conn.reading  # never held while it owes acks
        conn.unacked = 0
        conn.gate.update_congestion()  # (the adapter asks after each batch of frames)
        assert not conn.reading
        conn.feed([publish] * 4)
        assert conn.handled == 10  # the socket and the buffer wait
        # the queue drains to its low watermark: the rest is handled, reading resumes
        while queue.ready:
            queue.ready.popleft()
        queue.ready_bytes = 0
        queue.flow.after_drain()
        assert conn.handled == 10  # not inside the drain: on the next loop iteration
        await next_iteration()
        assert conn.handled == 13 and not conn.reading  # held again at 3 ready
        conn.gate.close()
        assert publisher not in (queue.flow.publishers or ())

    run(main)


def test_an_alarm_blocks_at_the_first_publish_and_release_reads_on() -> None:
    async def main() -> None:
        broker = memory_broker()
        alarms = broker.alarms
        conn = FakeConnection()
        conn.gate.watch_alarms(alarms)
        alarms.active = frozenset({"memory"})
        conn.gate._alarms_changed(alarms.active)
        assert conn.reading and not conn.blocked  # an idle connection is not blocked
        conn.feed([conn.gate.published, lambda: None])
        assert conn.handled == 1 and not conn.reading and conn.blocked == [{"memory"}]
        conn.gate.release()  # closing: its peer's close reply must be read
        await next_iteration()
        assert conn.handled == 2 and conn.reading
        assert conn.gate._alarms_changed not in alarms._listeners

    run(main)
