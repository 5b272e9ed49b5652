"""MQTT producers and consumers of ``roost perf`` on paho-mqtt (``--protocol mqtt
--mqtt-client paho``: what an application on paho gets; ``perf/mqtt_codec.py`` is the
default, for loads paho cannot generate).

paho is the MQTT client Python users run; it is driven here the way its documentation
shows for an external event loop: its socket registered with asyncio for reading and,
while paho has bytes to send, for writing (``on_socket_register_write``), and
``loop_misc`` once a second for keep-alive. MQTT 3.1.1, clean sessions.

The topic is the queue's name (``-u``, or each ``--queue-pattern`` name). As in RabbitMQ,
a broker routes an MQTT publish through ``amq.topic`` with the topic as routing key
(``/`` and ``.`` swap), so AMQP consumers (``--consumer-protocol amqp``) read queues that
perf binds there. Producers publish at QoS 1 under ``-c`` (its PUBACKs settle the
confirm window) or ``-f persistent`` (RabbitMQ stores QoS 1 messages as persistent),
else at QoS 0. Consumers subscribe at QoS 1 (paho sends the PUBACK once a message is
handled: the manual ack) or, with ``-a``, at QoS 0.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from roost.client.confirms import ConfirmTracker
from roost.perf.link_base import LinkBase, opened, subscribed
from roost.perf.mqtt_codec import MQTTError, Target, target
from roost.perf.options import TIMESTAMP_BYTES, Options
from roost.perf.stats import Tally

READS_PER_WAKE = 256  # packets handled per readable event (paho reads one per call)
QUEUED_HIGH = 2000  # packets waiting in paho before a producer holds


class _Link(LinkBase):
    """One paho client on this process's event loop, with what perf's loops use."""

    def __init__(self, where: Target, client_id: str) -> None:
        super().__init__()  # server stays "": MQTT's CONNACK names no server
        self.where = where
        self._closing = False
        self._misc: asyncio.TimerHandle | None = None
        c = self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                      protocol=paho.MQTTv311, clean_session=True)
        c.username_pw_set(where.user, where.password)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_socket_open = self._on_socket_open
        c.on_socket_close = self._on_socket_close
        c.on_socket_register_write = self._on_register_write
        c.on_socket_unregister_write = self._on_unregister_write

    # -- paho on asyncio (paho's "external event loop" integration) ---------------------

    async def open(self) -> None:
        w = self.where
        # paho's connect is a blocking TCP connect (short on loopback or a LAN); then
        # CONNECT waits in paho for the writer registered below
        self.client.connect(w.host, w.port, 60)
        self._tick()
        await asyncio.wait_for(asyncio.shield(self.connected), 30)

    def _on_socket_open(self, client: paho.Client, _u: Any, sock: Any) -> None:
        self.loop.add_reader(sock, self._readable)

    def _on_socket_close(self, client: paho.Client, _u: Any, sock: Any) -> None:
        self.loop.remove_reader(sock)
        self.loop.remove_writer(sock)

    def _on_register_write(self, client: paho.Client, _u: Any, sock: Any) -> None:
        self.loop.add_writer(sock, self.client.loop_write)

    def _on_unregister_write(self, client: paho.Client, _u: Any, sock: Any) -> None:
        self.loop.remove_writer(sock)
        self.wake()

    def _readable(self) -> None:
        """paho reads one packet a call: go on while packets keep coming."""
        for _ in range(READS_PER_WAKE):
            before = self.progress()
            if self.client.loop_read() != paho.MQTT_ERR_SUCCESS or self.progress() == before:
                break

    def progress(self) -> int:
        """Grows with every packet handled (how ``_readable`` knows to read on)."""
        return 0

    def _tick(self) -> None:
        self.client.loop_misc()  # keep-alive PINGREQs
        self._misc = self.loop.call_later(1.0, self._tick)

    # -- state --------------------------------------------------------------------------

    def _on_connect(self, client: paho.Client, _u: Any, _flags: Any, reason: Any,
                    _props: Any) -> None:
        if reason.is_failure:
            self.lost(MQTTError(f"CONNACK refused: {reason}"))
        elif not self.connected.done():
            self.connected.set_result(None)

    def _on_disconnect(self, client: paho.Client, _u: Any, _flags: Any, reason: Any,
                       _props: Any) -> None:
        if not self._closing:
            self.lost(MQTTError(f"the connection was closed ({reason})"))
        self.wake()

    def lost(self, exc: BaseException) -> None:
        self.ended(exc, record=not self._closing)

    @property
    def paused(self) -> bool:
        return self.client.want_write()

    async def close(self, timeout: float = 2.0) -> None:
        """Send what paho holds, then DISCONNECT (a broker handles a connection's packets
        in order: everything before it was taken)."""
        limit = time.monotonic() + timeout
        while self.error is None and self.client.want_write() and time.monotonic() < limit:
            await self.wait(limit - time.monotonic())
        self._closing = True
        if self.error is None:
            self.client.disconnect()
            while self.client.want_write() and time.monotonic() < limit:
                await self.wait(limit - time.monotonic())
        if self._misc is not None:
            self._misc.cancel()
        sock = self.client.socket()
        if sock is not None:
            self.loop.remove_reader(sock)
            self.loop.remove_writer(sock)
            sock.close()


class Producer(_Link):
    def __init__(self, where: Target, opts: Options, slot: int) -> None:
        super().__init__(where, f"roost-perf-p{slot}-{os.getpid()}")
        self.topic = opts.queue_of(slot)
        self.qos = 1 if opts.confirm or opts.persistent else 0
        self.client.max_inflight_messages_set(opts.confirm)  # 0: no limit
        self.client.on_publish = self._on_publish
        self.confirms = ConfirmTracker()
        self.sent = 0
        self.seq_of: dict[int, int] = {}  # paho's message id -> our 1, 2, 3…
        self.resize(opts.size)

    def resize(self, size: int) -> None:
        """Bodies of ``size`` bytes from now on (``--variable-size``)."""
        self.body = bytes(size)
        self.body_tail = bytes(max(0, size - TIMESTAMP_BYTES))
        # fixed header (<= 5) + topic length and name + message id + body
        self.message_bytes = 5 + 2 + len(self.topic.encode()) + 2 + size

    @property
    def settled(self) -> int:
        return self.confirms.settled

    @property
    def paused(self) -> bool:
        return len(self.client._out_packet) > QUEUED_HIGH  # paho offers no public count

    def progress(self) -> int:
        return self.confirms.settled

    def send(self, n: int, stamp: bytes) -> None:
        body = stamp + self.body_tail if stamp else self.body
        publish, topic, qos, seq_of = self.client.publish, self.topic, self.qos, self.seq_of
        for _ in range(n):
            self.sent += 1
            info = publish(topic, body, qos)
            if qos:
                seq_of[info.mid] = self.sent

    async def close(self, timeout: float = 2.0) -> None:
        """At QoS 1, first every PUBACK: closing a socket with unread bytes resets it, and
        a reset connection's publishes the broker had not read yet are gone."""
        limit = time.monotonic() + timeout
        while (self.qos and self.error is None and self.confirms.settled < self.sent
               and time.monotonic() < limit):
            await self.wait(limit - time.monotonic())
        await super().close(max(0.1, limit - time.monotonic()))

    def _on_publish(self, client: paho.Client, _u: Any, mid: int, reason: Any,
                    _props: Any) -> None:
        seq = self.seq_of.pop(mid, 0)
        if seq:  # QoS 1: the broker's PUBACK
            self.confirms.settle(seq, multiple=False, ok=not reason.is_failure)
            self.wake()


class Consumer(_Link):
    def __init__(self, where: Target, opts: Options, slot: int) -> None:
        super().__init__(where, f"roost-perf-c{slot}-{os.getpid()}")
        self.tally = Tally()
        self.topic = opts.queue_of(slot)
        self.qos = 0 if opts.auto_ack else 1
        self.subscribed: asyncio.Future[None] = self.loop.create_future()
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def progress(self) -> int:
        return self.tally.consumed

    def _readable(self) -> None:
        t = self.tally
        t.arrived(time.monotonic_ns())
        super()._readable()
        t.counted()
        if t.done:
            self.wake()

    def _on_message(self, client: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        # not counted once -D is reached or the run is over
        self.tally.take(msg.payload, time.monotonic_ns())

    def _on_subscribe(self, client: paho.Client, _u: Any, _mid: int, reasons: Any,
                      _props: Any) -> None:
        if any(r.is_failure for r in reasons):
            self.lost(MQTTError(f"SUBSCRIBE {self.topic} refused: {reasons}"))
        elif not self.subscribed.done():
            self.subscribed.set_result(None)

    async def subscribe(self) -> None:
        self.client.subscribe(self.topic, self.qos)
        await asyncio.wait_for(asyncio.shield(self.subscribed), 30)

    def finish(self) -> None:
        self.tally.full = True


async def open_producer(opts: Options, slot: int) -> Producer:
    return await opened(Producer(target(opts), opts, slot))


async def open_consumer(opts: Options, slot: int) -> Consumer:
    return await subscribed(Consumer(target(opts), opts, slot))

