"""One MQTT connection as a core client: the sans-IO session (no event loop, no socket).

Bytes go in through ``data_received``; packets come out through the transport's ``write``;
closing and pausing input are asked of the transport, and time and timers of the
``Clock`` the plumbing hands in (mqtt/protocol.py, mqtt/ws.py). When the socket is read
is the ``ReadGate``'s (roost/backpressure.py, as for AMQP and STOMP): congested queues,
resource alarms and a bounded turn of work per read. What a packet may do in
each state is the table of mqtt/states.py. A connection is one core Client with one core
Session (this object is its DeliverySink), reached only through the adapter port.

The mapping is RabbitMQ's MQTT plugin's (docs/mqtt.md): topics through ``amq.topic``;
a client's subscriptions are bindings of two queues, ``mqtt-subscription-<id>qos0``
(consumed without acks) and ``…qos1`` (acked by PUBACK), durable for a persistent session
and auto-delete for a clean one. A QoS 2 subscription is granted QoS 1; a QoS 2 PUBLISH
is answered PUBREC/PUBCOMP and delivered at QoS 1.

This module is the session's frame: input, output, flow control, keepalive and closing.
Each packet's work is in a part the session inherits, one module each: CONNECT in
mqtt/connecting.py, PUBLISH in mqtt/publishing.py, SUBSCRIBE and UNSUBSCRIBE in
mqtt/subscribing.py, deliveries in mqtt/delivering.py; mqtt/session_state.py declares
the state they share. What it asks of its plumbing is roost/lifecycle.py's
``SessionTransport`` and ``Clock``, its timers a ``lifecycle.Timers``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, cast

from roost.backpressure import ReadGate
from roost.core import AdapterPort, Traffic
from roost.core.errors import AccessRefused, BrokerError
from roost.lifecycle import Clock, ReadLoop, SessionTransport, Timers, release
from roost.mqtt import mapping
from roost.mqtt.codec import NEED_DATA, PacketReader, encode
from roost.mqtt.errors import MQTTError
from roost.mqtt.packets import (
    CONNACK,
    DISCONNECT,
    MQTT_5,
    ConnAck,
    Connect,
    Disconnect,
    Packet,
    PingResp,
    Properties,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    Subscribe,
    Unsubscribe,
)
from roost.mqtt.reason_codes import (
    ADMINISTRATIVE_ACTION,
    ALLOWED,
    DISCONNECT_WITH_WILL_MESSAGE,
    IMPLEMENTATION_SPECIFIC_ERROR,
    KEEP_ALIVE_TIMEOUT,
    NOT_AUTHORIZED,
    PACKET_IDENTIFIER_NOT_FOUND,
    PROTOCOL_ERROR,
    SERVER_SHUTTING_DOWN,
    SESSION_TAKEN_OVER,
    UNSPECIFIED_ERROR,
    connack_code_v3,
)
from roost.mqtt.retained import MQTTState
from roost.mqtt.states import State, advance
from roost.mqtt.subscriptions import Subscriptions
from roost.mqtt.topics import validate_topic_name

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client, Publisher, Session
    from roost.mqtt.aliases import OutgoingAliases

from roost.mqtt.connecting import Connecting
from roost.mqtt.delivering import Delivering
from roost.mqtt.publishing import Publishing
from roost.mqtt.session_state import log, subscription_queue
from roost.mqtt.settings import MQTTSettings
from roost.mqtt.subscribing import Subscribing

__all__ = ["MQTTSession", "MQTTSettings", "subscription_queue"]


class MQTTSession(ReadLoop, Connecting, Publishing, Subscribing, Delivering):
    def __init__(
        self,
        port: AdapterPort,
        settings: MQTTSettings,
        transport: SessionTransport,
        state: MQTTState,
        registry: set[Any],
        *,
        clock: Clock,
        protocol: str = "MQTT",
    ) -> None:
        self.port = port
        self.settings = settings
        self.transport = transport
        self.shared = state
        self.registry = registry
        self.protocol = protocol
        self.reader = PacketReader(max_packet_size=settings.max_packet_size)
        self.level = 4
        self.state = State.AWAITING_CONNECT
        self.client: Client | None = None
        self.session: Session | None = None
        self.publisher: Publisher | None = None
        self.client_id = ""
        self.key: tuple[str, str] = ("", "")
        self.persistent = False
        self.will: Any = None
        self.traffic = Traffic()
        self.close_reason = ""
        self.closed = False
        self._clock = clock
        self._heard = clock.time()
        self._keep_alive = 0.0
        # one timer per purpose (CONNECT deadline, keepalive check), each replaced when it
        # fires: a long-lived connection keeps no fired ones
        self._timers = Timers(clock)
        self._timers.set("connect", settings.connect_timeout, self._connect_timeout)
        # when the socket is read: queues congested by our PUBLISHes, resource alarms, a
        # turn's worth of work done, a pending definition (sans-IO like this session: it
        # pauses through the transport, times on the clock)
        self.gate = ReadGate(self, clock)
        self._consuming: set[int] = set()  # the QoS of the subscription queues consumed
        self._inflight: dict[int, int] = {}  # packet id -> delivery tag (0: a retained copy)
        self._next_id = 0
        self._qos2: set[int] = set()  # QoS 2 publishes answered PUBREC, awaiting PUBREL
        self._aliases: dict[int, str] = {}
        self._aliases_out: OutgoingAliases | None = None  # server-to-client, when allowed
        self._acks_owed = 0  # QoS 1/2 PUBLISHes not yet answered PUBACK/PUBREC
        self._session_expiry = 0  # MQTT 5 session expiry interval, seconds
        self._max_out = 0  # the client's maximum packet size (MQTT 5), 0 = none
        self._prefetch = settings.prefetch
        self._queue_arguments: dict[str, Any] = {}
        self.subscriptions = Subscriptions()  # filter -> MQTT 5 options (mqtt/subscriptions.py)
        self._in_publish = False
        self._sync_acks: list[tuple[int, int, bool]] = []
        # QoS 1 subscription deliveries sent at QoS 0, settled by a loop, not recursion
        self._sent_tags: deque[int] = deque()
        registry.add(self)

    # -- input ----------------------------------------------------------------------------

    # (the read path is lifecycle.ReadLoop's: data_received → work → gate.read_done)

    def heard(self) -> None:
        self._heard = self._clock.time()

    def feed(self, data: bytes) -> None:
        self.reader.feed(data)

    def work(self) -> None:
        """Handle the packets read so far while the gate is open, a turn's worth at most;
        what is left waits in the reader (and the socket is not read) until it opens."""
        reader = self.reader
        gate = self.gate
        try:
            while gate.open and not self.closed:
                packet = reader.next_packet()
                if packet is NEED_DATA:
                    break
                self._handle(cast("Packet", packet))
                gate.left -= 1
                if not gate.left:
                    gate.end_turn()
        except MQTTError as exc:
            self._fail(exc.reason_code, exc.text)
        except AccessRefused as exc:
            self._fail(NOT_AUTHORIZED, exc.text)
        except BrokerError as exc:
            self._fail(UNSPECIFIED_ERROR, exc.text)
        except Exception:
            log.exception("%s: internal error", self.transport.peer)
            self._fail(IMPLEMENTATION_SPECIFIC_ERROR, "internal error")
        if gate.holding and not self.closed:
            gate.update_congestion()  # PUBACKs in this batch may have changed the answer

    def _handle(self, packet: Packet) -> None:
        self.state = advance(self.state, packet.packet_type)
        if isinstance(packet, Publish):
            self._on_publish(packet)
        elif isinstance(packet, PubAck):
            tag = self._inflight.pop(packet.packet_id, None)
            if tag and self.session is not None:
                self.session.ack(tag, False)
        elif isinstance(packet, PubRel):
            known = packet.packet_id in self._qos2
            self._qos2.discard(packet.packet_id)
            self._send(PubComp(packet.packet_id, 0 if known else PACKET_IDENTIFIER_NOT_FOUND))
        elif isinstance(packet, (PubRec, PubComp)):
            pass  # the server sends no QoS 2 deliveries
        elif isinstance(packet, Subscribe):
            self._on_subscribe(packet)
        elif isinstance(packet, Unsubscribe):
            self._on_unsubscribe(packet)
        elif isinstance(packet, Connect):
            self._on_connect(packet)
        elif isinstance(packet, Disconnect):
            if packet.reason_code != DISCONNECT_WITH_WILL_MESSAGE:
                self.will = None
            self.close_reason = "client sent DISCONNECT"
            self._close()
        else:
            self._send(PingResp())

    # -- output ---------------------------------------------------------------------------

    def _send(self, packet: Packet) -> None:
        data = encode(packet, self.level)
        self.traffic.send_oct += len(data)
        self.traffic.send_cnt += 1
        self.transport.write(data)

    def _fail(self, code: int, text: str) -> None:
        """Malformed or forbidden input: the reason code where the protocol has a packet
        for it (MQTT 5's DISCONNECT, CONNACK while connecting), then a close."""
        log.warning("%s: MQTT error 0x%02X: %s", self.transport.peer, code, text)
        if self.closed:
            return
        packet_type = CONNACK if self.client is None else DISCONNECT
        if code not in ALLOWED[packet_type]:  # a code the packet cannot carry
            code = PROTOCOL_ERROR if packet_type == DISCONNECT else UNSPECIFIED_ERROR
        if self.client is None:
            if self.level == MQTT_5:
                self._send(ConnAck(code, properties=Properties(reason_string=text[:200])))
            elif (v3 := connack_code_v3(code)) is not None:
                self._send(ConnAck(v3))
        elif self.level == MQTT_5:
            self._send(Disconnect(code, Properties(reason_string=text[:200])))
        self.close_reason = f"0x{code:02X} {text}"
        self._close()

    def _close(self) -> None:
        self._release()
        self.transport.close()

    # -- input flow control (roost/backpressure.py) -----------------------------------------

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def owes_acks(self) -> bool:
        """QoS 1 deliveries await PUBACKs on this connection: congestion must not pause
        it (its PUBACKs may be what drains the queue)."""
        return self.session is not None and self.session.unacked_count > 0

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        log.info("%s: blocked by resource alarm(s): %s", self.transport.peer,
                 ", ".join(sorted(alarms)))

    def alarm_unblocked(self) -> None:
        pass  # MQTT has no packet for it: the socket is simply read again

    # -- keepalive and timers -------------------------------------------------------------

    def _schedule(self, delay: float) -> None:
        self._timers.set("keepalive", delay, self._check_keep_alive)

    def _check_keep_alive(self) -> None:
        """Runs when the keepalive deadline (1.5 x the keepalive after the last packet
        heard) would pass, and closes the connection if nothing came meanwhile."""
        if self.closed:
            return
        if self.gate.paused:  # its packets wait unread in the socket
            self._heard = self._clock.time()
        silent = self._clock.time() - self._heard
        if silent > self._keep_alive:
            self._fail(KEEP_ALIVE_TIMEOUT, f"no packet for {silent:.1f}s")
            return
        self._schedule(self._keep_alive - silent + 0.01)

    def _connect_timeout(self) -> None:
        if self.client is None and not self.closed:
            self.close_reason = "no CONNECT in time"
            self._close()

    # -- closing --------------------------------------------------------------------------

    def taken_over(self) -> None:
        """Another connection came with this client id: this one goes (MQTT 3.1.4)."""
        if not self.closed:
            self._fail(SESSION_TAKEN_OVER, "another connection took over the client id")

    def force_close(self, reason: str) -> None:
        """Closed from the broker side (management API, a deleted user or vhost)."""
        if not self.closed:
            self._fail(ADMINISTRATIVE_ACTION, reason)

    def shutdown(self, reason: str = "shutdown") -> None:
        if not self.closed:
            self._fail(SERVER_SHUTTING_DOWN, reason)

    def _abort(self, reason: str) -> None:
        self.close_reason = self.close_reason or reason
        self._close()

    def connection_lost(self) -> None:
        self.close_reason = self.close_reason or "client closed the socket"
        self._release()

    def _release(self) -> None:
        """Give back what the connection holds; publish the will unless it was
        withdrawn by a normal DISCONNECT."""
        if self.closed:
            return
        self.closed = True
        self.state = State.CLOSED
        self._timers.cancel_all()
        self.registry.discard(self)
        self.gate.close()  # no queue or alarm holds it any more (not even its will)
        if self.shared.sessions.get(self.key) is self:
            del self.shared.sessions[self.key]
        client = self.client
        if client is None:
            return
        if self.will is not None and self.port.is_connected(client):
            delay = self.will.properties.will_delay_interval if self.level == MQTT_5 else 0
            # the will waits for its delay or the session's end, whichever comes first
            delay = min(delay or 0, self._session_expiry)
            if delay:
                key = self.key
                self.shared.pending_wills[key] = self._clock.call_later(
                    delay, self._delayed_will, client, self.will
                )
                self.will = None
            else:
                self._publish_will(client)
        if release(self.port, client, self.close_reason, self.gate):
            log.info(
                "%s: MQTT connection closed (client id=%s): %s",
                self.transport.peer, self.client_id, self.close_reason or "closed",
            )

    def _delayed_will(self, client: Client, will: Any) -> None:
        """The will delay passed and no connection resumed the session: publish it."""
        if self.shared.pending_wills.get(self.key) is not None:
            del self.shared.pending_wills[self.key]
        self.will = will
        self._publish_will(client)

    def _publish_will(self, client: Client) -> None:
        will = self.will
        self.will = None
        try:
            validate_topic_name(will.topic)
            props = will.properties if self.level == MQTT_5 else None
            qos = min(will.qos, 1)
            message = mapping.message_from_publish(will.topic, will.payload, qos, props)
            self.port.publish(client, mapping.EXCHANGE, message)
            if will.retain:  # after the publish, whose permission check it shares
                self._retain(will.topic, message, client)
        except (MQTTError, BrokerError) as exc:
            log.warning("%s: will not published: %s", self.transport.peer, exc)


