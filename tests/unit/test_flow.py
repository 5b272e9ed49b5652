"""Queue congestion and the publishers it holds (core/flow.py), on the core alone."""

from __future__ import annotations

import pytest

from roost.core import flow
from roost.core.broker import Broker
from roost.core.message import Message, Properties
from roost.core.session import Session
from roost.core.settings import BrokerSettings
from tests.brokers import memory_broker


class Sink:
    def __init__(self) -> None:
        self.tags: list[int] = []

    def deliver(self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message):
        self.tags.append(delivery_tag)

    def consumer_cancelled(self, consumer_tag: str) -> None:
        pass


@pytest.fixture
def broker() -> Broker:
    broker = memory_broker()
    return broker


@pytest.fixture
def client(broker: Broker):
    user = broker.authenticate("guest", "guest", peer_host="127.0.0.1")
    return broker.connect(user, "/", protocol="test", peer="127.0.0.1:1")


def small_watermarks(broker: Broker, client, name: str = "q"):
    queue = broker.declare_queue(client, name)
    queue.flow.high_messages, queue.flow.low_messages = 10, 4
    return queue


def consumer(broker: Broker, client, queue: str, prefetch: int) -> tuple[Session, Sink]:
    sink = Sink()
    session = broker.open_session(client, sink)
    session.set_qos(prefetch, False)
    c = broker.consume(session, queue, "c", no_ack=False, exclusive=False)
    session.start(c)
    return session, sink


def publish(broker: Broker, client, publisher, n: int, queue: str = "q") -> None:
    for _ in range(n):
        broker.publish(client, "", Message("", queue, Properties(), b"x"), publisher=publisher)


def test_publisher_held_at_high_watermark_and_released_at_low(broker: Broker, client) -> None:
    small_watermarks(broker, client)
    session, sink = consumer(broker, client, "q", prefetch=1)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    publish(broker, client, publisher, 10)  # 1 delivered, 9 ready: below 10
    assert changes == []
    assert broker.management.queries.queue_info("/", "q").state == "running"
    publish(broker, client, publisher, 1)  # 10 ready: congested
    assert changes == [True] and publisher.held
    # as the management API shows it
    assert broker.management.queries.queue_info("/", "q").state == "flow"
    for _ in range(5):  # 10 -> 5 ready: still above the low watermark
        session.ack(sink.tags[-1], False)
    assert changes == [True]
    session.ack(sink.tags[-1], False)  # 4 ready
    assert changes == [True, False] and not publisher.held


def test_queue_without_consumers_never_holds(broker: Broker, client) -> None:
    small_watermarks(broker, client)
    changes: list[bool] = []
    publish(broker, client, broker.new_publisher(changes.append), 100)
    assert changes == []


def test_last_consumer_leaving_releases(broker: Broker, client) -> None:
    small_watermarks(broker, client)
    session, _ = consumer(broker, client, "q", prefetch=1)
    changes: list[bool] = []
    publish(broker, client, broker.new_publisher(changes.append), 20)
    assert changes == [True]
    session.cancel("c")
    assert changes == [True, False]


def test_deleting_the_queue_releases(broker: Broker, client) -> None:
    small_watermarks(broker, client)
    consumer(broker, client, "q", prefetch=1)
    changes: list[bool] = []
    publish(broker, client, broker.new_publisher(changes.append), 20)
    broker.delete_queue(client, "q")
    assert changes == [True, False]


def test_held_until_every_congested_queue_lets_go(broker: Broker, client) -> None:
    small_watermarks(broker, client, "a")
    small_watermarks(broker, client, "b")
    sa, _ = consumer(broker, client, "a", prefetch=1)
    sb, _ = consumer(broker, client, "b", prefetch=1)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    publish(broker, client, publisher, 20, "a")
    publish(broker, client, publisher, 20, "b")
    assert changes == [True]
    sa.ack(0, True)
    sa.cancel("c")
    assert changes == [True]  # b still congested
    sb.cancel("c")
    assert changes == [True, False]


def test_stalled_queue_lets_publishers_go(broker: Broker, client, monkeypatch) -> None:
    """A consumer that never acks must not hold publishers for ever."""
    queue = small_watermarks(broker, client)
    consumer(broker, client, "q", prefetch=1)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    publish(broker, client, publisher, 20)
    assert changes == [True]
    publisher.check_progress()  # too soon to tell
    assert changes == [True]
    clock = flow.time.monotonic() + flow.STALL_AFTER + 0.1
    monkeypatch.setattr(flow.time, "monotonic", lambda: clock)
    publisher.check_progress()
    assert changes == [True, False] and queue.flow.stalled
    publish(broker, client, publisher, 20)  # stalled: holds nobody
    assert changes == [True, False]


class FakeClock:
    """``time.monotonic`` as core/flow.py sees it, moved on by hand."""

    def __init__(self, monkeypatch) -> None:
        self.now = 1000.0
        monkeypatch.setattr(flow.time, "monotonic", lambda: self.now)

    def pass_interval(self, publisher) -> None:
        self.now += flow.STALL_AFTER + 0.1
        publisher.check_progress()  # what the ReadGate's watchdog does about once a second


def auto_ack_consumer(broker: Broker, client) -> tuple[Session, Sink]:
    sink = Sink()
    session = broker.open_session(client, sink)
    c = broker.consume(session, "q", "c", no_ack=True, exclusive=False)
    session.start(c)
    return session, sink


def test_consumer_waiting_for_its_socket_keeps_holding(broker: Broker, client, monkeypatch):
    """A slow auto-ack consumer is paced by its socket: seconds without a delivery while
    its write buffer drains are no stall, and its publishers stay held."""
    clock = FakeClock(monkeypatch)
    queue = small_watermarks(broker, client)
    session, sink = auto_ack_consumer(broker, client)
    session.set_writable(False)  # the consumer's socket is full (pause_writing)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    publish(broker, client, publisher, 20)
    assert changes == [True] and sink.tags == []
    for _ in range(5):  # five intervals without one delivery
        clock.pass_interval(publisher)
    assert changes == [True] and not queue.flow.stalled
    session.set_writable(True)  # it drained: takes the whole backlog, lets go
    assert len(sink.tags) == 20 and changes == [True, False]


def test_socket_wait_without_a_delivery_is_capped(broker: Broker, client, monkeypatch):
    """A consumer that waits on its socket but never reads (a hung process, its TCP
    connection alive) holds its publishers only up to SOCKET_WAIT_CAP, counted from its
    last delivery, then the queue is stalled and lets them go."""
    clock = FakeClock(monkeypatch)
    queue = small_watermarks(broker, client)
    session, sink = auto_ack_consumer(broker, client)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    assert publisher.socket_wait_cap == flow.SOCKET_WAIT_CAP == 60.0  # the default
    session.set_writable(False)
    publish(broker, client, publisher, 20)
    assert changes == [True]
    for _ in range(30):  # 33 s without a delivery: under the cap
        clock.pass_interval(publisher)
    real_deliver = sink.deliver

    def deliver_three(*args) -> None:  # its socket takes three, then is full again
        real_deliver(*args)
        if len(sink.tags) == 3:
            session.set_writable(False)

    sink.deliver = deliver_three
    session.set_writable(True)
    assert len(sink.tags) == 3 and changes == [True]  # still congested: 17 ready
    clock.pass_interval(publisher)  # the delivery is seen: the cap counts from here
    delivered_at = clock.now
    while clock.now - delivered_at < flow.SOCKET_WAIT_CAP - flow.STALL_AFTER:
        clock.pass_interval(publisher)  # nothing read since; still under the cap
        assert changes == [True] and not queue.flow.stalled
    clock.pass_interval(publisher)
    assert changes == [True, False] and queue.flow.stalled


def test_socket_wait_cap_comes_from_the_settings(monkeypatch) -> None:
    """``--flow-socket-wait-cap`` (BrokerSettings.flow_socket_wait_cap); 0 = no cap."""
    clock = FakeClock(monkeypatch)
    broker = memory_broker(BrokerSettings(flow_socket_wait_cap=5.0))
    user = broker.authenticate("guest", "guest", peer_host="127.0.0.1")
    client = broker.connect(user, "/", protocol="test", peer="127.0.0.1:1")
    queue = small_watermarks(broker, client)
    session, _ = auto_ack_consumer(broker, client)
    session.set_writable(False)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    publish(broker, client, publisher, 20)
    for _ in range(4):  # 4 x 1.1 s: under 5 s
        clock.pass_interval(publisher)
    assert changes == [True]
    clock.pass_interval(publisher)
    assert changes == [True, False] and queue.flow.stalled
    uncapped = memory_broker(BrokerSettings(flow_socket_wait_cap=0))
    assert uncapped.new_publisher(changes.append).socket_wait_cap == 0


def test_socket_wait_of_a_connection_not_being_read_is_no_progress(
    broker: Broker, client, monkeypatch
) -> None:
    """Its client may be blocked writing to us (publishing to a queue it consumes from)
    and never read: the stall rule must still break that cycle."""
    clock = FakeClock(monkeypatch)
    queue = small_watermarks(broker, client)
    session, _ = auto_ack_consumer(broker, client)
    session.set_writable(False)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    publish(broker, client, publisher, 20)
    clock.pass_interval(publisher)
    assert changes == [True]
    client.flow_held = True  # what the ReadGate sets while it pauses this connection
    clock.pass_interval(publisher)
    assert changes == [True, False] and queue.flow.stalled


def test_full_prefetch_stalls_even_while_the_socket_is_full(
    broker: Broker, client, monkeypatch
) -> None:
    """Prefetch full and no acks coming: the consumer waits for acks, not for its socket,
    so the queue is stalled after the interval and lets its publishers go."""
    clock = FakeClock(monkeypatch)
    queue = small_watermarks(broker, client)
    session, sink = consumer(broker, client, "q", prefetch=1)
    changes: list[bool] = []
    publisher = broker.new_publisher(changes.append)
    publish(broker, client, publisher, 20)
    assert changes == [True] and len(sink.tags) == 1
    session.set_writable(False)
    clock.pass_interval(publisher)
    assert changes == [True, False] and queue.flow.stalled


def test_closed_publisher_is_forgotten(broker: Broker, client) -> None:
    queue = small_watermarks(broker, client)
    consumer(broker, client, "q", prefetch=1)
    publisher = broker.new_publisher(lambda held: None)
    publish(broker, client, publisher, 20)
    publisher.close()
    assert not queue.flow.publishers


def test_ack_feeds_the_acking_consumer_but_never_a_cancelled_one(broker: Broker, client) -> None:
    """``Queue.dispatch_to``: an ack's credit goes to that consumer, unless it was cancelled."""
    broker.declare_queue(client, "q")
    s1, k1 = consumer(broker, client, "q", prefetch=1)
    s2, k2 = consumer(broker, client, "q", prefetch=1)
    publish(broker, client, None, 4)
    assert (len(k1.tags), len(k2.tags)) == (1, 1)  # 2 ready
    s1.ack(k1.tags[-1], False)
    assert (len(k1.tags), len(k2.tags)) == (2, 1)  # the acker got the next one
    s1.cancel("c")
    s1.ack(k1.tags[-1], False)
    assert len(k1.tags) == 2  # cancelled: nothing more for it
    s2.ack(k2.tags[-1], False)
    assert len(k2.tags) == 2  # the last message went to the live consumer
