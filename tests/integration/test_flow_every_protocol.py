"""Publisher flow control on every protocol (issue 19): a publisher that never waits,
sending to a queue whose one consumer acks slowly, is held by TCP back-pressure (its
socket is not read, the management API shows its connection in state ``flow``), the
queue's ready backlog stays within the flow watermark, and once the consumer speeds up
every message arrives exactly once.

The publishers are what users run: pika's ``basic_publish`` in a loop (AMQP); a raw
socket writing many STOMP ``SEND``s per write without receipts (STOMP over TCP); a
WebSocket client sending many ``SEND``s per WebSocket message (STOMP over WebSocket); a
raw socket writing many QoS 0 MQTT ``PUBLISH``es per write (MQTT). The consumers are
pika and stomp.py (over TCP and over WebSocket) with manual acks and a prefetch of 100,
an MQTT QoS 1 subscription read slowly (its QoS 0 messages need no PUBACK: reading
the socket is what paces it), and a raw-socket STOMP ``ack:auto`` subscriber read
slowly (the same: its socket paces it, and its queue must not be called stalled while
the socket drains), and its AMQP twin, a raw-socket ``no_ack`` consumer read 2 KiB at a
time (pika reads 128 KiB a call, too fast to be paced). Bodies are 1 KiB so that 20 MB
of publishes cannot all hide in the kernel's socket buffers.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pika
import stomp
import websocket

from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    BodyFrame,
    FrameReader,
    MethodFrame,
    encode_method_frame,
)
from roost.core.flow import HIGH_MESSAGES
from roost.mqtt import codec
from roost.mqtt.packets import Connect, Disconnect, Publish, Subscribe, Subscription
from tests.support import RoostProcess

TOTAL = 20_000
SLOW_PHASE = 3.0  # seconds of a consumer acking one message every ~2 ms
BATCH = 64  # STOMP frames a write


def body(seq: int) -> bytes:
    return f"{seq:08d}".encode().ljust(1024, b".")


def seq_of(payload: bytes | str) -> int:
    return int(payload[:8])


def stomp_sends(qname: str, start: int) -> bytes:
    """SENDs of messages ``start`` … ``start + BATCH - 1`` (up to TOTAL) in one write."""
    head = b"SEND\ndestination:/queue/" + qname.encode() + b"\n\n"
    return b"".join(head + body(s) + b"\x00" for s in range(start, min(start + BATCH, TOTAL)))


CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nheart-beat:0,0\n\n\x00"


@dataclass
class Consumer:
    """Deliveries as they came; ``ack`` settles one by its id (called from the test)."""

    ack: Callable[[Any], None]
    pending: queue.Queue[tuple[Any, int]] = field(default_factory=queue.Queue)
    seqs: list[int] = field(default_factory=list)
    # pika's BlockingConnection is single-threaded: its events are pumped from here
    pump: Callable[[], None] = lambda: None

    def delivered(self, ack_id: Any, seq: int) -> None:
        self.seqs.append(seq)
        self.pending.put((ack_id, seq))

    def ack_one(self, wait: float) -> bool:
        self.pump()
        try:
            ack_id, _ = self.pending.get(timeout=wait)
        except queue.Empty:
            return False
        self.ack(ack_id)
        return True


def api(server: RoostProcess, path: str) -> Any:
    reply = httpx.get(f"{server.http_url}/api/{path}", auth=("guest", "guest"), timeout=5)
    reply.raise_for_status()
    return reply.json()


def check_held_then_all_arrive(
    server: RoostProcess,
    qname: str,
    consumer: Consumer,
    producer: threading.Thread,
    producer_port: Callable[[], int],
    total: int = TOTAL,
) -> None:
    producer.start()
    peak = 0
    flow_seen = False
    stop_at = time.monotonic() + SLOW_PHASE
    next_look = 0.0
    while time.monotonic() < stop_at:
        consumer.ack_one(0.002)
        time.sleep(0.002)
        if time.monotonic() >= next_look:
            next_look = time.monotonic() + 0.2
            peak = max(peak, api(server, f"queues/%2F/{qname}")["messages_ready"])
            port = producer_port()
            flow_seen = flow_seen or any(
                c["peer_port"] == port and c["state"] == "flow"
                for c in api(server, "connections")
            )
    # held: the publisher's writes wait (its socket is not read), the backlog stops at
    # the high watermark, the management API says "flow"
    assert producer.is_alive(), "the publisher wrote everything: it was never held"
    assert flow_seen, "the publisher's connection never showed state 'flow'"
    assert HIGH_MESSAGES // 2 <= peak <= HIGH_MESSAGES, peak
    taken = len(consumer.seqs) + api(server, f"queues/%2F/{qname}")["messages"]
    assert taken < total * 3 // 4, taken
    # the consumer speeds up: every message arrives, each once
    deadline = time.monotonic() + 90
    while len(consumer.seqs) < total:
        assert time.monotonic() < deadline, f"{len(consumer.seqs)} of {total} arrived"
        consumer.ack_one(0.5)
    while consumer.ack_one(0.05):
        pass
    producer.join(30)
    assert not producer.is_alive()
    assert sorted(consumer.seqs) == list(range(total))
    assert "stalled" not in server.log  # the slow consumer kept its queue moving


# -- AMQP ---------------------------------------------------------------------------------


def test_amqp_publisher_is_held_and_nothing_is_lost(fresh_roost: RoostProcess, qname: str) -> None:
    params = pika.URLParameters(fresh_roost.url)
    conn = pika.BlockingConnection(params)
    channel = conn.channel()
    channel.queue_declare(qname)
    channel.basic_qos(prefetch_count=100)
    consumer = Consumer(ack=lambda tag: channel.basic_ack(tag))
    consumer.pump = lambda: conn.process_data_events(time_limit=0)
    channel.basic_consume(
        qname, lambda _ch, method, _props, data: consumer.delivered(method.delivery_tag,
                                                                    seq_of(data))
    )
    ports: list[int] = []

    def produce() -> None:
        params = pika.URLParameters(fresh_roost.url)
        params.heartbeat = 0
        publisher = pika.BlockingConnection(params)
        sock = publisher._impl._transport._sock  # its port, to find it in the API
        ports.append(sock.getsockname()[1])
        ch = publisher.channel()
        for seq in range(TOTAL):
            ch.basic_publish("", qname, body(seq))
        publisher.close()

    producer = threading.Thread(target=produce)
    try:
        check_held_then_all_arrive(
            fresh_roost, qname, consumer, producer, lambda: ports[0] if ports else -1
        )
    finally:
        conn.close()


class RawAmqpReader:
    """An AMQP 0-9-1 consumer on a plain socket, spoken with Roost's codec, so that the
    test decides how much it reads a call (pika reads 128 KiB at a time)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(5)
        self.reader = FrameReader(frame_max=0, expect_protocol_header=False)

    def send(self, channel: int, method: Any) -> None:
        self.sock.sendall(encode_method_frame(channel, method))

    def expect(self, kind: type[Any]) -> Any:
        while True:
            while (frame := self.reader.next_frame()) is not NEED_DATA:
                if isinstance(frame, MethodFrame):
                    assert isinstance(frame.method, kind), frame.method
                    return frame.method
            self.reader.feed(self.sock.recv(4096))

    def consume(self, qname: str) -> None:
        self.sock.sendall(PROTOCOL_HEADER)
        self.expect(m.ConnectionStart)
        self.send(0, m.ConnectionStartOk(client_properties={}, mechanism="PLAIN",
                                         response=b"\x00guest\x00guest"))  # fmt: skip
        tune = self.expect(m.ConnectionTune)
        self.send(0, m.ConnectionTuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max,
                                        heartbeat=0))  # fmt: skip
        self.send(0, m.ConnectionOpen(virtual_host="/"))
        self.expect(m.ConnectionOpenOk)
        self.send(1, m.ChannelOpen())
        self.expect(m.ChannelOpenOk)
        self.send(1, m.QueueDeclare(queue=qname))
        self.expect(m.QueueDeclareOk)
        self.send(1, m.BasicConsume(queue=qname, consumer_tag="slow", no_ack=True))
        self.expect(m.BasicConsumeOk)
        self.sock.settimeout(0.05)

    def bodies(self, nbytes: int) -> list[bytes]:
        """Read at most ``nbytes`` from the socket; the message bodies completed."""
        try:
            self.reader.feed(self.sock.recv(nbytes))
        except TimeoutError:
            return []
        out = []
        while (frame := self.reader.next_frame()) is not NEED_DATA:
            if isinstance(frame, BodyFrame):  # 1 KiB bodies: one body frame each
                out.append(frame.payload)
        return out


def test_amqp_auto_ack_reader_paced_by_its_socket_holds_the_publisher(
    fresh_roost: RoostProcess, qname: str
) -> None:
    """The AMQP twin of the STOMP ``ack:auto`` reader below: a ``no_ack`` consumer that
    reads 2 KiB a call is paced by its socket alone, goes more than a second without a
    delivery while the kernel's buffers drain to it, and still holds its publisher (a
    pika ``basic_publish`` loop) in ``flow``; every message arrives once."""
    reader = RawAmqpReader(fresh_roost.amqp_port)
    reader.consume(qname)
    consumer = Consumer(ack=lambda _id: None)  # nothing to ack: the reads pace it

    def pump() -> None:  # 2 KiB a call: ~0.5 MB/s (~500 messages/s) in the slow phase
        if len(consumer.seqs) < TOTAL:
            for payload in reader.bodies(2048):
                consumer.delivered(None, seq_of(payload))

    consumer.pump = pump
    ports: list[int] = []

    def produce() -> None:
        params = pika.URLParameters(fresh_roost.url)
        params.heartbeat = 0
        publisher = pika.BlockingConnection(params)
        ports.append(publisher._impl._transport._sock.getsockname()[1])
        ch = publisher.channel()
        for seq in range(TOTAL):
            ch.basic_publish("", qname, body(seq))
        publisher.close()

    producer = threading.Thread(target=produce)
    try:
        check_held_then_all_arrive(
            fresh_roost, qname, consumer, producer, lambda: ports[0] if ports else -1
        )
    finally:
        reader.sock.close()


# -- STOMP over TCP -----------------------------------------------------------------------


class StompInbox(stomp.ConnectionListener):
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def on_message(self, frame: Any) -> None:
        self.consumer.delivered(frame.headers["ack"], seq_of(frame.body))


def subscribe(conn: Any, qname: str) -> Consumer:
    consumer = Consumer(ack=conn.ack)
    conn.set_listener("inbox", StompInbox(consumer))
    conn.connect("guest", "guest", wait=True)
    conn.subscribe(
        f"/queue/{qname}", id="slow", ack="client-individual",
        headers={"prefetch-count": "100"},
    )
    return consumer


def test_stomp_publisher_is_held_and_nothing_is_lost(
    fresh_roost: RoostProcess, qname: str
) -> None:
    conn = stomp.Connection12([("127.0.0.1", fresh_roost.stomp_port)])
    consumer = subscribe(conn, qname)
    sock = socket.create_connection(("127.0.0.1", fresh_roost.stomp_port))
    sock.sendall(CONNECT)
    assert sock.recv(4096).startswith(b"CONNECTED")
    time.sleep(0.2)  # the subscription declared the queue

    def produce() -> None:
        for start in range(0, TOTAL, BATCH):  # many frames per write, no receipts
            sock.sendall(stomp_sends(qname, start))
        sock.sendall(b"DISCONNECT\nreceipt:bye\n\n\x00")
        assert b"RECEIPT" in sock.recv(4096)

    producer = threading.Thread(target=produce)
    try:
        check_held_then_all_arrive(
            fresh_roost, qname, consumer, producer, lambda: sock.getsockname()[1]
        )
    finally:
        sock.close()
        conn.disconnect()


def test_stomp_auto_ack_reader_paced_by_its_socket_holds_the_publisher(
    fresh_roost: RoostProcess, qname: str
) -> None:
    """An ``ack:auto`` subscriber that reads its socket slowly takes no acks' time: its
    socket is what paces it, and the kernel's buffers let it go more than a second
    without a delivery while megabytes still drain to it. Its queue is not stalled: the
    publisher stays held and the backlog within the watermark."""
    sub = socket.socket()
    sub.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sub.connect(("127.0.0.1", fresh_roost.stomp_port))
    sub.sendall(CONNECT)
    sub.sendall(f"SUBSCRIBE\nid:slow\ndestination:/queue/{qname}\nack:auto\nreceipt:sub\n\n"
                .encode() + b"\x00")
    sub.settimeout(5)
    buffer = b""
    while b"RECEIPT" not in buffer:  # CONNECTED, then the subscription's receipt
        buffer += sub.recv(4096)
    buffer = b""
    sub.settimeout(0.05)
    consumer = Consumer(ack=lambda _id: None)  # nothing to ack: the reads pace it

    def pump() -> None:  # 2 KiB a call: ~0.5 MB/s (~500 messages/s) in the slow phase
        nonlocal buffer
        if len(consumer.seqs) >= TOTAL:
            return
        try:
            buffer += sub.recv(2048)
        except TimeoutError:
            return
        *frames, buffer = buffer.split(b"\x00")  # 1 KiB bodies of digits and dots
        for frame in frames:
            head, _, payload = frame.lstrip(b"\n").partition(b"\n\n")
            assert head.startswith(b"MESSAGE\n"), head
            consumer.delivered(None, seq_of(payload))

    consumer.pump = pump
    pub = socket.create_connection(("127.0.0.1", fresh_roost.stomp_port))
    pub.sendall(CONNECT)
    assert pub.recv(4096).startswith(b"CONNECTED")

    def produce() -> None:
        for start in range(0, TOTAL, BATCH):  # many frames per write, no receipts
            pub.sendall(stomp_sends(qname, start))
        pub.sendall(b"DISCONNECT\nreceipt:bye\n\n\x00")
        assert b"RECEIPT" in pub.recv(4096)

    producer = threading.Thread(target=produce)
    try:
        check_held_then_all_arrive(
            fresh_roost, qname, consumer, producer, lambda: pub.getsockname()[1]
        )
    finally:
        pub.close()
        sub.close()


# -- STOMP over WebSocket -----------------------------------------------------------------


def test_websocket_publisher_is_held_and_nothing_is_lost(
    fresh_roost: RoostProcess, qname: str
) -> None:
    conn = stomp.WSConnection(
        [("127.0.0.1", fresh_roost.ws_port)], ws_path="/ws"
    )
    consumer = subscribe(conn, qname)
    ws = websocket.create_connection(
        f"ws://127.0.0.1:{fresh_roost.ws_port}/ws", subprotocols=["v12.stomp"], timeout=60
    )
    ws.send_binary(CONNECT)
    assert ws.recv().startswith("CONNECTED")
    time.sleep(0.2)

    def produce() -> None:
        for start in range(0, TOTAL, BATCH):  # many frames per WebSocket message
            ws.send_binary(stomp_sends(qname, start))
        ws.send_binary(b"DISCONNECT\nreceipt:bye\n\n\x00")
        assert "RECEIPT" in ws.recv()

    producer = threading.Thread(target=produce)
    try:
        check_held_then_all_arrive(
            fresh_roost, qname, consumer, producer, lambda: ws.sock.getsockname()[1]
        )
    finally:
        ws.close()
        conn.disconnect()


# -- MQTT ---------------------------------------------------------------------------------


# QoS 0 deliveries also fill the socket buffers between Roost and the subscriber (and
# Linux lets a paused server socket's receive buffer grow to 32 MB): more than 20 MB
# must be sent for a held publisher to be told from one that wrote everything
MQTT_TOTAL = 50_000


def test_mqtt_publisher_is_held_and_nothing_is_lost(fresh_roost: RoostProcess) -> None:
    """QoS 0 PUBLISHes to a QoS 1 subscription go out at QoS 0, each settled as it is
    written: a backlog of them once recursed (deliver, ack, deliver…) until the
    subscriber stopped, its queue was called stalled and the publisher ran free. A
    subscriber paced by its socket (not by acks) is not stalled either: it reads."""
    sub = socket.socket()
    # a small window: QoS 0 deliveries would otherwise fill megabytes of socket buffers
    sub.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sub.connect(("127.0.0.1", fresh_roost.mqtt_port))
    sub.sendall(codec.encode(Connect("flow-sub", keep_alive=0), 4))
    sub.sendall(codec.encode(Subscribe(1, [Subscription("flow/mqtt", 1)]), 4))
    reader = codec.PacketReader(role="client", protocol_level=4)
    consumer = Consumer(ack=lambda _tag: None)  # nothing to ack: the reads pace it

    def pump() -> None:  # a few messages' worth a call: ~1,000 msg/s in the slow phase
        if len(consumer.seqs) >= MQTT_TOTAL:
            return  # all here: the test drains what it has not taken yet
        try:
            data = sub.recv(4096)
        except TimeoutError:
            return
        reader.feed(data)
        while (packet := reader.next_packet()) is not codec.NEED_DATA:
            if isinstance(packet, Publish):
                consumer.delivered(None, seq_of(packet.payload))

    consumer.pump = pump
    pub = socket.create_connection(("127.0.0.1", fresh_roost.mqtt_port))
    pub.sendall(codec.encode(Connect("flow-pub", keep_alive=0), 4))
    assert pub.recv(4)[0] >> 4 == 2  # CONNACK
    sub.settimeout(5)
    acks = b""
    while len(acks) < 9:  # CONNACK (4 bytes), SUBACK (5 bytes): the queue is there
        acks += sub.recv(9 - len(acks))
    assert acks[4] >> 4 == 9 and acks[8] == 1, acks
    sub.settimeout(0.05)

    def produce() -> None:
        for start in range(0, MQTT_TOTAL, BATCH):  # many packets per write, no waiting
            pub.sendall(b"".join(
                codec.encode(Publish("flow/mqtt", body(s)), 4)
                for s in range(start, min(start + BATCH, MQTT_TOTAL))
            ))
        pub.sendall(codec.encode(Disconnect(), 4))

    producer = threading.Thread(target=produce)
    try:
        check_held_then_all_arrive(
            fresh_roost, "mqtt-subscription-flow-subqos1", consumer, producer,
            lambda: pub.getsockname()[1], MQTT_TOTAL,
        )
    finally:
        pub.close()
        sub.close()
