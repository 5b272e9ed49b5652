"""A topic subscription's queue in less memory (core/queues/subscription.py) behaves as
the classic queue it replaces: deliveries in every ack mode, prefetch, flow control,
UNSUBSCRIBE and disconnect freeing it, and the management API showing it. The session
runs without sockets on a fake clock over an in-memory broker (as tests/stomp/
test_session.py), except the management test, which uses a real server and stomp.py."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from typing import Any

import httpx
import pytest

from roost.backpressure import FRAMES_PER_TURN
from roost.core.consumer import AckingConsumer, Consumer
from roost.core.exchanges.base import Exchange
from roost.core.flow import HIGH_MESSAGES
from roost.core.queues.base import Queue
from roost.core.queues.subscription import IDLE_FLOW, SubscriptionQueue
from roost.stomp.handler import StompHandler
from roost.stomp.subscription import NONE_OUTSTANDING, SubscriptionWithOptions
from tests.brokers import memory_broker
from tests.fake_clock import FakeClock
from tests.stomp.conftest import Connect, bindings_of, queue_info, subscription_queue
from tests.stomp.sessions import CONNECT, connection, session


def _queues(handler: StompHandler) -> dict[str, Any]:
    queues: dict[str, Any] = handler.broker.vhosts["/"].queues  # type: ignore[attr-defined]
    return queues


def _subscribe(handler: StompHandler, clock: FakeClock, headers: str) -> SubscriptionQueue:
    before = set(_queues(handler))
    handler.data_received(f"SUBSCRIBE\n{headers}\n\n\x00".encode())
    clock.advance(0)  # the consumer starts after the frame (call_soon)
    [name] = set(_queues(handler)) - before
    queue = _queues(handler)[name]
    assert isinstance(queue, SubscriptionQueue)
    return queue


@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
def test_a_topic_subscription_delivers_acks_and_keeps_its_prefetch(ack: str) -> None:
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, f"id:s\ndestination:/topic/t.x\nack:{ack}\nprefetch-count:2")
    assert queue.exclusive_owner is handler.client and queue.auto_delete and not queue.durable
    assert [c.tag for c in queue.consumers] == ["s"] and queue.flow is IDLE_FLOW
    for n in range(3):
        handler.data_received(f"SEND\ndestination:/topic/t.x\n\nm{n}\x00".encode())
    handler.data_received(b"SEND\ndestination:/topic/t.other\n\nnot for s\x00")
    messages = [f for f in transport.frames() if f.command == "MESSAGE"]
    if ack == "auto":
        assert [m.body for m in messages] == [b"m0", b"m1", b"m2"]
        assert queue.unacked == 0 and queue.message_count == 0
    else:  # the prefetch holds the third back, in the queue's own backlog
        assert [m.body for m in messages] == [b"m0", b"m1"]
        assert queue.unacked == 2 and queue.message_count == 1
        assert queue.flow is not IDLE_FLOW and queue.flow.queue is queue
        handler.data_received(f"ACK\nid:{messages[1].headers['ack']}\n\n\x00".encode())
        messages = [f for f in transport.frames() if f.command == "MESSAGE"]
        assert [m.body for m in messages] == [b"m0", b"m1", b"m2"]
        # client mode is cumulative (m0 went with m1); client-individual is not
        assert queue.unacked == (1 if ack == "client" else 2)
        handler.data_received(f"NACK\nid:{messages[2].headers['ack']}\n\n\x00".encode())
        redelivered = [f for f in transport.frames() if f.command == "MESSAGE"][-1]
        assert redelivered.body == b"m2" and redelivered.headers["redelivered"] == "true"
        assert queue.stat_redelivered == 1
    assert queue.stat_published == 3
    assert all(m.headers["subscription"] == "s" for m in messages)
    assert all(m.headers["destination"] == "/topic/t.x" for m in messages)


@pytest.mark.parametrize("ack", ["auto", "client\nprefetch-count:1"])
@pytest.mark.parametrize("end", ["UNSUBSCRIBE\nid:s", "DISCONNECT"])
def test_unsubscribe_and_disconnect_free_the_queue_and_its_binding(end: str, ack: str) -> None:
    # (ack:auto: the queue is its own consumer; a client ack: a consumer of its own)
    handler, _transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, f"id:s\ndestination:/topic/t.y\nack:{ack}")
    handler.data_received(b"SEND\ndestination:/topic/t.y\n\none\x00" * 2)  # 1 unacked, 1 ready
    name, gone = queue.name, weakref.ref(queue)
    topic = handler.broker.vhosts["/"].exchange("amq.topic")  # type: ignore[attr-defined]
    assert len(topic.bindings_to(queue)) == 1
    del queue
    handler.data_received(f"{end}\n\n\x00".encode())
    clock.advance(0)
    assert name not in _queues(handler)
    assert gone() is None  # freed by reference counting, not by a later collection
    assert handler.session is None or not handler.session.consumers
    assert not [b for b in topic.bindings if getattr(b.destination, "name", "") == name]


def test_a_subscription_with_a_backlog_congests_and_holds_the_producer() -> None:
    broker = memory_broker()
    clock = FakeClock()
    consumer, _ = connection(broker, clock)
    producer, producer_transport = connection(broker, clock)
    consumer.data_received(CONNECT)
    queue = _subscribe(
        consumer, clock, "id:s\ndestination:/topic/flow\nack:client-individual\nprefetch-count:1"
    )
    producer.data_received(CONNECT)
    sends = 0
    while producer_transport.reading and sends < 2 * HIGH_MESSAGES:
        producer.data_received(b"SEND\ndestination:/topic/flow\n\nx\x00" * FRAMES_PER_TURN)
        sends += FRAMES_PER_TURN
        clock.advance(0)
    assert queue.flow.congested and producer.gate.flow_held
    assert HIGH_MESSAGES <= queue.message_count < HIGH_MESSAGES + FRAMES_PER_TURN
    consumer.data_received(b"DISCONNECT\n\n\x00")  # its queue goes: nobody holds the producer
    clock.advance(0)
    assert producer_transport.reading and not producer.gate.flow_held


def test_durable_and_queue_subscriptions_keep_a_classic_queue() -> None:
    handler, _transport, clock = session()
    handler.data_received(CONNECT)
    handler.data_received(
        b"SUBSCRIBE\nid:d\ndestination:/topic/t.z\npersistent:true\n\n\x00"
        b"SUBSCRIBE\nid:q\ndestination:/queue/plain\n\n\x00"
    )
    clock.advance(0)
    kinds = {type(q) for q in _queues(handler).values()}
    assert kinds == {Queue}
    assert any(q.durable for q in _queues(handler).values())


def test_the_common_path_writes_only_slots_and_every_queue_attribute_is_there() -> None:
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, "id:s\ndestination:/topic/t.w\nack:client-individual")
    handler.data_received(b"SEND\ndestination:/topic/t.w\n\nx\x00")
    message = transport.frames()[-1]
    handler.data_received(f"ACK\nid:{message.headers['ack']}\n\n\x00".encode())
    assert queue.stat_acked == 1
    assert vars(queue) == {}  # nothing spilled into an instance dict
    [consumer] = queue.consumers  # no options: none kept (ConsumerWithOptions has them)
    assert type(consumer) is AckingConsumer and not hasattr(consumer, "__dict__")
    assert (consumer.exclusive, consumer.priority, consumer.ack_timeout) == (False, 0, 0.0)
    # whatever Queue.__init__ sets (also after a change to it) a subscription queue has
    plain = Queue(handler.broker.vhosts["/"], "plain")  # type: ignore[attr-defined]
    missing = [name for name in vars(plain) if not hasattr(queue, name)]
    assert missing == []


@pytest.mark.parametrize(("ack", "bound"), [("auto", 630), ("client-individual", 780)])
def test_topic_subscriptions_cost_at_most_630_bytes_each_in_process(ack: str, bound: int) -> None:
    # 2,000 topic subscriptions on one connection: 1,465 bytes each with a classic queue
    # per subscription and a memo of permitted names, 1,137 with a slim queue, 928 (no
    # entry in the connection's exclusive queues, no key tuple per binding, a consumer
    # list with room for one, three fields fewer per STOMP subscription, a Consumer without
    # options keeps none of them), 773 now (a binding, a consumer and a subscription read
    # what they lack from their class, the subscription shares its binding's key, the
    # queue keeps three attributes fewer and a shorter name), 669 now (an ack:auto
    # subscription's queue is its own consumer: no Consumer, no consumer list), 612 now (the
    # session keeps an ack:auto subscription as its binding's key, no object). A
    # client-individual one: 988 before, 756 now (its consumer kept without a list, its
    # subscription in 64 bytes, with the key and no dict of its own). Python's own
    # allocations, which tracemalloc counts the same on every run of one Python version.
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    frames = b"".join(
        f"SUBSCRIBE\nid:s{n}\ndestination:/topic/mem.{n}\nack:{ack}\n\n\x00".encode()
        for n in range(2000)
    )
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        handler.data_received(frames)
        for _turn in range(20):  # a turn's worth of frames per loop turn
            clock.advance(0)
        transport.data = b""
        del frames
        gc.collect()
        each = (tracemalloc.get_traced_memory()[0] - before) / 2000
    finally:
        tracemalloc.stop()
    assert len(handler.subscriptions) == 2000
    assert each <= bound, each


@pytest.mark.parametrize("ack", ["auto", "client-individual"])
def test_the_management_api_shows_a_topic_subscription_as_its_queue(
    roost: Any, connect: Connect, ack: str
) -> None:
    # ack:auto: the queue is its own consumer (SubscriptionQueue.consumed_by_itself); the
    # API shows it as RabbitMQ's STOMP plugin shows its subscription queue and consumer
    conn, listener = connect()
    prefetch = {"prefetch-count": "5"} if ack != "auto" else {}
    conn.subscribe(f"/topic/mgmt.{ack}", id="sub-m", ack=ack,
                   headers={**prefetch, "receipt": "r1"})
    listener.receipt()
    name = subscription_queue(roost, "sub-m")
    assert name.startswith("stomp-subscription-")
    info = queue_info(roost, name)
    assert (info["exclusive"], info["auto_delete"], info["durable"]) == (True, True, False)
    assert info["consumers"] == 1 and info["arguments"] == {}
    assert [(b["source"], b["routing_key"]) for b in bindings_of(roost, name)
            if b["source"]] == [("amq.topic", f"mgmt.{ack}")]
    listed = httpx.get(f"{roost.http_url}/api/queues/%2F", auth=("guest", "guest"), timeout=5)
    assert name in [q["name"] for q in listed.json()]
    consumers = httpx.get(f"{roost.http_url}/api/consumers", auth=("guest", "guest"), timeout=5)
    [consumer] = [c for c in consumers.json() if c["consumer_tag"] == "sub-m"]
    assert (consumer["exclusive"], consumer["ack_required"]) == (False, ack != "auto")
    assert consumer["prefetch_count"] == (5 if ack != "auto" else 0)
    conn.send(f"/topic/mgmt.{ack}", "one")
    listener.message()
    assert queue_info(roost, name)["messages_unacknowledged"] == (1 if ack != "auto" else 0)
    conn.unsubscribe(id="sub-m", headers={"receipt": "r2"})
    listener.receipt()
    url = f"{roost.http_url}/api/queues/%2F/{name}"
    assert httpx.get(url, auth=("guest", "guest"), timeout=5).status_code == 404
    consumers = httpx.get(f"{roost.http_url}/api/consumers", auth=("guest", "guest"), timeout=5)
    assert not [c for c in consumers.json() if c["consumer_tag"] == "sub-m"]


def test_ending_a_subscription_scans_no_other_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    # each subscription knows its binding: ending one of 100,000 looked at every binding
    # of every exchange (0.65 s to disconnect 400 subscriptions among 20,000)
    handler, _transport, clock = session()
    handler.data_received(CONNECT)
    queues = [_subscribe(handler, clock, f"id:s{n}\ndestination:/topic/scan.{n}") for n in range(3)]
    gone = [weakref.ref(q) for q in queues]
    del queues

    def scanned(*_args: object) -> None:
        raise AssertionError("every binding scanned")

    monkeypatch.setattr(Exchange, "bindings_to", scanned)
    handler.data_received(b"UNSUBSCRIBE\nid:s0\n\n\x00DISCONNECT\n\n\x00")
    clock.advance(0)
    assert [ref() for ref in gone] == [None, None, None]
    topic = handler.broker.vhosts["/"].exchange("amq.topic")  # type: ignore[attr-defined]
    assert not [b for b in topic.bindings if b.routing_key.startswith("scan.")]


def test_a_deleted_exchange_leaves_its_subscriptions_unbound() -> None:
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    broker, client = handler.broker, handler.client
    assert client is not None
    broker.declare_exchange(client, "news", "direct")
    queue = _subscribe(handler, clock, "id:s\ndestination:/exchange/news/sport")
    assert [b.routing_key for b in queue.bindings()] == ["sport"]
    broker.delete_exchange(client, "news")
    assert queue.bindings() == []
    gone = weakref.ref(queue)
    del queue
    handler.data_received(b"UNSUBSCRIBE\nid:s\n\n\x00")
    clock.advance(0)
    assert gone() is None and transport.frames()[-1].command != "ERROR"


def test_a_policy_applies_to_subscription_queues() -> None:
    # what the class says a subscription queue never has, a policy gives it: max-length 1
    # with a subscriber that acks nothing keeps one message ready, drops the older ones
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, "id:s\ndestination:/topic/pol\nack:client\nprefetch-count:1")
    handler.broker.catalog.put_policy(  # type: ignore[attr-defined]
        "/", "one", pattern="^stomp-subscription-", definition={"max-length": 1}
    )
    assert queue.features is not None
    handler.data_received(b"SEND\ndestination:/topic/pol\n\nm\x00" * 4)
    assert queue.message_count == 1 and queue.unacked == 1
    assert [f.body for f in transport.frames() if f.command == "MESSAGE"] == [b"m"]


def test_a_subscription_queue_ends_with_its_consumer_not_in_the_exclusive_queues() -> None:
    handler, _transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, "id:s\ndestination:/topic/t.e")
    client = handler.client
    assert client is not None and queue.exclusive_owner is client
    assert queue not in client.exclusive_queues  # a set entry each: 40-100 bytes
    handler.connection_lost()
    assert queue.deleted and queue.name not in _queues(handler)


@pytest.mark.parametrize("refused", ["bind", "consume"])
def test_a_refused_subscribe_leaves_no_queue_behind(refused: str) -> None:
    # the queue is declared first; a binding or a consumer refused after it must not leave
    # it behind (it is not among the connection's exclusive queues to go at the end)
    handler, transport, clock = session()
    if refused == "consume":  # may declare and bind, may not read the queue
        handler.broker.catalog.put_permission(  # type: ignore[attr-defined]
            "guest", "/", configure=".*", write=".*", read="^amq\\.topic$"
        )
        destination = "/topic/t.r"
    else:
        destination = "/exchange/missing/key"
    handler.data_received(CONNECT)
    handler.data_received(f"SUBSCRIBE\nid:s\ndestination:{destination}\n\n\x00".encode())
    clock.advance(0)
    error = transport.frames()[-1]
    assert error.command == "ERROR", error
    handler.connection_lost()
    assert not [n for n in _queues(handler) if n.startswith("stomp-subscription-")]


def _queue_of(handler: StompHandler, sub_id: str) -> Any:
    return handler.session.consumers[sub_id].queue  # type: ignore[union-attr]


def test_an_ack_auto_topic_subscription_keeps_only_its_id_and_the_bindings_key() -> None:
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, "id:a\ndestination:/topic/t.auto")
    # no ack, no prefetch: the queue is its own consumer, no Consumer and no list kept
    [consumer] = queue.consumers
    assert consumer is queue and handler.session.consumers["a"] is queue  # type: ignore[union-attr]
    assert isinstance(consumer, Consumer) and vars(queue) == {}
    assert (consumer.no_ack, consumer.prefetch, consumer.unacked, consumer.tag) == (True, 0, 0, "a")
    # its id is the key, and the session keeps the binding's key alone: no object
    [binding] = queue.bindings()
    assert handler.subscriptions["a"] is binding.routing_key == "t.auto"
    assert not hasattr(binding, "__dict__") and binding.arguments == {}
    handler.data_received(b"SEND\ndestination:/topic/t.auto\n\nx\x00")
    message = transport.frames()[-1]
    assert message.headers["destination"] == "/topic/t.auto" and message.body == b"x"
    assert message.headers["subscription"] == "a"
    # a destination that is not /topic/ + its key as written keeps its own text
    _subscribe(handler, clock, "id:q\ndestination:/topic/t%2Eq")
    assert handler.subscriptions["q"] == "/topic/t%2Eq"
    _subscribe(handler, clock, "id:e\ndestination:/exchange/amq.topic/t.e")
    assert handler.subscriptions["e"] == "/exchange/amq.topic/t.e"
    # a client-ack one keeps an object, with the key too, and no dict of its own until
    # its first delivery
    _subscribe(handler, clock, "id:c\ndestination:/topic/t.c\nack:client\nprefetch-count:3")
    sub = handler.subscriptions["c"]
    assert type(sub) is SubscriptionWithOptions and sub.destination == "/topic/t.c"
    assert sub._destination is _queue_of(handler, "c").bindings()[0].routing_key
    assert sub.outstanding is NONE_OUTSTANDING
    handler.data_received(b"SEND\ndestination:/topic/t.c\n\ny\x00")
    message = transport.frames()[-1]
    assert message.body == b"y" and message.headers["subscription"] == "c"
    assert list(sub.outstanding) == [int(message.headers["ack"])]
    assert NONE_OUTSTANDING == {}
    consumer = handler.session.consumers["c"]  # type: ignore[union-attr]
    # its one consumer is kept alone, without a list
    assert type(consumer) is AckingConsumer and consumer.queue._consumers is consumer


@pytest.mark.parametrize("ack", ["auto", "client-individual"])
def test_a_subscription_queue_consumed_twice_still_takes_turns(ack: str) -> None:
    # its one consumer reads a constant turn; a second (the connection subscribing to the
    # queue by name) brings the round robin back, and the queue ends with the last of them
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, f"id:a\ndestination:/topic/t.rr\nack:{ack}")
    handler.data_received(f"SUBSCRIBE\nid:b\ndestination:/amq/queue/{queue.name}\n\n\x00".encode())
    clock.advance(0)
    assert len(queue.consumers) == 2 and vars(queue) == {}
    for n in range(4):
        handler.data_received(f"SEND\ndestination:/topic/t.rr\n\nm{n}\x00".encode())
    messages = [f for f in transport.frames() if f.command == "MESSAGE"]
    got = [(f.headers["subscription"], f.body) for f in messages]
    assert got == [("a", b"m0"), ("b", b"m1"), ("a", b"m2"), ("b", b"m3")]
    handler.data_received(b"UNSUBSCRIBE\nid:b\n\n\x00")
    assert [c.tag for c in queue.consumers] == ["a"] and queue.name in _queues(handler)
    handler.data_received(b"SEND\ndestination:/topic/t.rr\n\nm4\x00")
    assert transport.frames()[-1].headers["subscription"] == "a"
    handler.data_received(b"UNSUBSCRIBE\nid:a\n\n\x00")
    assert queue.deleted and queue.name not in _queues(handler) and not queue.consumers


@pytest.mark.parametrize("ack", ["auto", "client-individual"])
def test_a_queue_deleted_under_its_one_consumer_tells_the_client(ack: str) -> None:
    # DELETE /api/queues/... of a subscription's queue (its own consumer, or its one
    # consumer kept without a list): the session forgets the consumer, the client gets an
    # ERROR, nothing stays behind
    handler, transport, clock = session()
    handler.data_received(CONNECT)
    queue = _subscribe(handler, clock, f"id:a\ndestination:/topic/t.gone\nack:{ack}")
    assert handler.session is not None and "a" in handler.session.consumers
    assert (handler.session.consumers["a"] is queue) == (ack == "auto")
    name, gone = queue.name, weakref.ref(queue)
    handler.broker.vhosts["/"].delete_queue(queue)  # type: ignore[attr-defined]
    del queue
    assert name not in _queues(handler) and gone() is None
    assert transport.frames()[-1].command == "ERROR"
    assert "subscription cancelled" in transport.frames()[-1].headers["message"]
