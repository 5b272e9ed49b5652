"""MQTT producers and consumers of ``roost perf`` made of Roost's sans-IO MQTT codec
(``--mqtt-client codec``, the default), for loads paho cannot generate.

paho encodes each PUBLISH in Python, writes each with its own ``send`` and reads one
packet per call: in ``bench/perf_mqtt_bench.py`` a QoS 1 pair of paho clients moved
17,000 msg/s through Roost where these links moved 48,600 (docs/perf.md, Figures).
These links do what perf's AMQP links do: a producer writes a batch as one pre-encoded
PUBLISH repeated (only the timestamp, and at QoS 1 the packet id, change), a subscriber
parses a whole read with the codec and answers with its PUBACKs in one write. Same
MQTT 3.1.1 on the wire, same meaning of every flag as ``perf/mqtt.py`` (paho).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from roost.client.confirms import ConfirmTracker
from roost.mqtt.codec import PacketReader, encode
from roost.mqtt.packets import (
    ConnAck,
    Connect,
    PubAck,
    Publish,
    SubAck,
    Subscribe,
    Subscription,
)
from roost.perf.link_base import LinkBase, opened, subscribed
from roost.perf.options import TIMESTAMP_BYTES, Options
from roost.perf.stats import Tally

LEVEL = 4  # MQTT 3.1.1
MAX_IN_FLIGHT = 65535  # packet ids: QoS 1 publishes waiting for their PUBACK
DISCONNECT = b"\xe0\x00"
DEFAULT_PORT = 1883


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    user: str
    password: str


def target(opts: Options) -> Target:
    """``--mqtt-url`` (default: ``--url``'s host on 1883). Without a user in it, ``--url``'s
    user and password; a vhost other than ``/`` goes in the user name as ``vhost:user``,
    as RabbitMQ's MQTT plugin reads it."""
    ep = opts.endpoint
    parts = urlsplit(opts.mqtt_url or f"mqtt://{ep.address[0]}:{DEFAULT_PORT}")
    if parts.scheme.lower() != "mqtt":
        raise ValueError(f"--mqtt-url wants an mqtt:// URL: {opts.mqtt_url}")
    if parts.username is not None:
        user = unquote(parts.username)
        password = unquote(parts.password or "")
    else:
        user = ep.user if ep.vhost == "/" else f"{ep.vhost}:{ep.user}"
        password = ep.password
    return Target(parts.hostname or "localhost", parts.port or DEFAULT_PORT, user, password)


class MQTTError(Exception):
    """The broker refused the connection or a subscription, or the connection ended."""



class _Link(LinkBase, asyncio.Protocol):
    """One MQTT connection on an asyncio transport, with what perf's loops use."""

    def __init__(self, where: Target, client_id: str) -> None:
        super().__init__()  # server stays "": CONNACK names no server
        self.where, self.client_id = where, client_id
        self.reader = PacketReader(role="client", protocol_level=LEVEL)
        self.writes_paused = False
        self._closing = False
        self.transport: asyncio.Transport | None = None

    async def open(self) -> None:
        w = self.where
        await self.loop.create_connection(lambda: self, w.host, w.port)
        self.write(encode(Connect(self.client_id, LEVEL, clean_start=True, keep_alive=0,
                                  username=w.user, password=w.password.encode()), LEVEL))
        await asyncio.wait_for(asyncio.shield(self.connected), 30)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    # -- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            packets = self.reader.packets()
        except Exception as exc:  # the broker sent what the codec refuses: end the run
            self.lost(MQTTError(f"bad packet from the broker: {exc}"))
            return
        self.received(packets)

    def received(self, packets: Sequence[object]) -> None:
        for packet in packets:
            self.packet(packet)

    def packet(self, packet: object) -> None:
        if isinstance(packet, ConnAck):
            if packet.reason_code:
                self.lost(MQTTError(f"CONNACK refused: return code {packet.reason_code}"))
            elif not self.connected.done():
                self.connected.set_result(None)

    def pause_writing(self) -> None:
        self.writes_paused = True

    def resume_writing(self) -> None:
        self.writes_paused = False
        self.wake()

    @property
    def paused(self) -> bool:
        return self.writes_paused

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closing:
            self.lost(exc or MQTTError("the connection was closed"))
        self.wake()

    # -- state ----------------------------------------------------------------------------

    def lost(self, exc: BaseException) -> None:
        self.ended(exc, record=not self._closing)
        if self.transport is not None:
            self.transport.close()

    async def close(self, timeout: float = 2.0) -> None:
        """DISCONNECT, then close: a broker handles a connection's packets in order."""
        self._closing = True
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(DISCONNECT)
            self.transport.close()


class Producer(_Link):
    def __init__(self, where: Target, opts: Options, slot: int) -> None:
        super().__init__(where, f"roost-perf-p{slot}-{os.getpid()}")
        self.topic = opts.queue_of(slot)
        self.qos = 1 if opts.confirm or opts.persistent else 0
        self.confirms = ConfirmTracker()
        self.sent = 0
        self.pubacks = 0
        self.resize(opts.size)

    def resize(self, size: int) -> None:
        """One PUBLISH of ``size`` bytes split around its packet id (QoS 1) and the
        first 8 bytes of its payload, which carry the timestamp."""
        packet_id = 1 if self.qos else None
        whole = encode(Publish(self.topic, bytes(size), self.qos, packet_id=packet_id), LEVEL)
        self.message_bytes = len(whole)
        head = len(whole) - size - (2 if self.qos else 0)  # up to the packet id / payload
        self.head, self.whole = whole[:head], whole
        self.tail = whole[len(whole) - size + TIMESTAMP_BYTES:] if size >= TIMESTAMP_BYTES else b""
        self.body = whole[head + (2 if self.qos else 0):]

    @property
    def settled(self) -> int:
        return self.confirms.settled

    @property
    def paused(self) -> bool:
        """The socket's buffer is full, or every packet id is in flight."""
        return self.writes_paused or (self.qos > 0 and self.sent - self.pubacks >= MAX_IN_FLIGHT)

    def send(self, n: int, stamp: bytes) -> None:
        body = stamp + self.tail if stamp else self.body
        if not self.qos:
            self.write((self.head + body) * n)
            self.sent += n
            return
        head, first = self.head, self.sent
        self.write(b"".join(head + ((first + i) % MAX_IN_FLIGHT + 1).to_bytes(2, "big") + body
                            for i in range(n)))
        self.sent += n

    def received(self, packets: Sequence[object]) -> None:
        acks = 0
        for packet in packets:
            if type(packet) is PubAck:
                acks += 1  # a broker answers a connection's QoS 1 publishes in order
            else:
                self.packet(packet)
        if acks:
            self.pubacks += acks
            self.confirms.settle(self.pubacks, multiple=True)
            self.wake()

    async def close(self, timeout: float = 2.0) -> None:
        """At QoS 1, first every PUBACK: a socket closed with unread bytes is reset, and
        the broker loses the publishes it had not read yet."""
        limit = time.monotonic() + timeout
        while (self.qos and self.error is None and self.pubacks < self.sent
               and time.monotonic() < limit):
            await self.wait(limit - time.monotonic())
        await super().close()


class Consumer(_Link):
    def __init__(self, where: Target, opts: Options, slot: int) -> None:
        super().__init__(where, f"roost-perf-c{slot}-{os.getpid()}")
        self.tally = Tally()
        self.topic = opts.queue_of(slot)
        self.qos = 0 if opts.auto_ack else 1
        self.subscribed: asyncio.Future[None] = self.loop.create_future()
        self.puback = encode(PubAck(1), LEVEL)[:-2]  # then the 2-byte packet id

    async def subscribe(self) -> None:
        self.write(encode(Subscribe(1, [Subscription(self.topic, self.qos)]), LEVEL))
        await asyncio.wait_for(asyncio.shield(self.subscribed), 30)

    def received(self, packets: Sequence[object]) -> None:
        t = self.tally
        now = time.monotonic_ns()
        t.arrived(now)
        acks: list[bytes] = []
        puback = self.puback
        for packet in packets:
            if type(packet) is not Publish:
                self.packet(packet)
                continue
            if packet.packet_id is not None:  # QoS 1: acknowledged whether counted or not
                acks.append(puback + packet.packet_id.to_bytes(2, "big"))
            t.take(packet.payload, now)  # not counted once -D is reached or the run is over
        t.counted()
        if acks:
            self.write(b"".join(acks))
        if t.done:
            self.wake()

    def packet(self, packet: object) -> None:
        if isinstance(packet, SubAck):
            if any(code >= 0x80 for code in packet.reason_codes):
                self.lost(MQTTError(f"SUBSCRIBE {self.topic} refused"))
            elif not self.subscribed.done():
                self.subscribed.set_result(None)
        else:
            super().packet(packet)

    def finish(self) -> None:
        self.tally.full = True


async def open_producer(opts: Options, slot: int) -> Producer:
    return await opened(Producer(target(opts), opts, slot))


async def open_consumer(opts: Options, slot: int) -> Consumer:
    return await subscribed(Consumer(target(opts), opts, slot))
