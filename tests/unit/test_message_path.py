"""A queue class's own ``_offer`` and ``_delivered`` are the ones a push or a dispatch
calls (core/queues/message_path.py calls MessagePath's bodies directly, past mypyc's
glue, only where the class keeps them), on both builds."""

from __future__ import annotations

from roost.core.broker import Broker
from roost.core.message import Message, Properties
from roost.core.queues.base import Queue
from roost.core.queues.entry import Entry
from roost.core.session import Session
from tests.brokers import memory_broker

CALLS: list[str] = []


class OffersNothing(Queue):
    """Refuses every offer: messages stay ready although a consumer has credit."""

    def _offer(self, entry: Entry) -> bool:
        CALLS.append("offer")
        return False


class CountsDeliveries(Queue):
    def _delivered(self, entry: Entry) -> None:
        CALLS.append("delivered")
        super()._delivered(entry)


class Sink:
    def __init__(self) -> None:
        self.tags: list[int] = []

    def deliver(self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message):
        self.tags.append(delivery_tag)

    def consumer_cancelled(self, consumer_tag: str) -> None:
        pass


def setup(queue_class: type[Queue]) -> tuple[Broker, object, Queue, Session, Sink]:
    CALLS.clear()
    broker = memory_broker()
    client = broker.connect(
        broker.authenticate("guest", "guest", peer_host="127.0.0.1"),
        "/",
        protocol="test",
        peer="127.0.0.1:1",
    )
    vhost = broker.catalog.vhosts["/"]
    queue = queue_class(vhost, "q")
    vhost.queues["q"] = queue
    sink = Sink()
    session = broker.open_session(client, sink)
    session.set_qos(1, False)
    session.start(broker.consume(session, "q", "c", no_ack=False, exclusive=False))
    return broker, client, queue, session, sink


def publish(broker: Broker, client: object, n: int) -> None:
    for _ in range(n):
        broker.publish(client, "", Message("", "q", Properties(), b"x"))  # type: ignore[arg-type]


def test_a_plain_queue_delivers_through_the_native_steps() -> None:
    broker, client, queue, session, sink = setup(Queue)
    publish(broker, client, 3)
    assert len(sink.tags) == 1 and len(queue.ready) == 2
    session.ack(sink.tags[-1], False)  # dispatch_to: the next one
    assert len(sink.tags) == 2 and queue.unacked == 1 and queue.stat_delivered == 2


def test_an_overridden_offer_is_the_one_push_and_dispatch_call() -> None:
    broker, client, queue, _session, sink = setup(OffersNothing)
    publish(broker, client, 2)
    assert CALLS == ["offer"]  # the second found a backlog: no offer
    assert sink.tags == [] and len(queue.ready) == 2
    queue.dispatch()
    assert CALLS == ["offer", "offer"] and sink.tags == []


def test_an_overridden_delivered_is_the_one_offer_and_dispatch_to_call() -> None:
    broker, client, queue, session, sink = setup(CountsDeliveries)
    publish(broker, client, 2)
    assert CALLS == ["delivered"] and len(sink.tags) == 1
    session.ack(sink.tags[-1], False)  # dispatch_to
    assert CALLS == ["delivered", "delivered"] and len(sink.tags) == 2
    assert queue.stat_delivered == 2
