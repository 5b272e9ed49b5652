"""One MQTT connection as a core client: the sans-IO session (no event loop, no socket).

Bytes go in through ``data_received``; packets come out through ``MQTTTransport.write``;
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
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from roost.backpressure import ReadGate
from roost.core import AdapterPort, Message, Traffic
from roost.core.errors import AccessRefused, BrokerError, NotFound
from roost.lifecycle import ReadLoop, login, open_client, release
from roost.mqtt import mapping, shared
from roost.mqtt.codec import NEED_DATA, PacketReader, encode
from roost.mqtt.errors import MQTTError
from roost.mqtt.limits import INFLIGHT, negotiate
from roost.mqtt.packets import (
    CONNACK,
    DISCONNECT,
    MQTT_5,
    PUBLISH,
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
    SubAck,
    Subscribe,
    UnsubAck,
    Unsubscribe,
)
from roost.mqtt.reason_codes import (
    ADMINISTRATIVE_ACTION,
    ALLOWED,
    BAD_AUTHENTICATION_METHOD,
    BAD_USER_NAME_OR_PASSWORD,
    CLIENT_IDENTIFIER_NOT_VALID,
    DISCONNECT_WITH_WILL_MESSAGE,
    IMPLEMENTATION_SPECIFIC_ERROR,
    KEEP_ALIVE_TIMEOUT,
    NO_MATCHING_SUBSCRIBERS,
    NO_SUBSCRIPTION_EXISTED,
    NOT_AUTHORIZED,
    PACKET_IDENTIFIER_NOT_FOUND,
    PROTOCOL_ERROR,
    QUOTA_EXCEEDED,
    RECEIVE_MAXIMUM_EXCEEDED,
    SERVER_SHUTTING_DOWN,
    SERVER_UNAVAILABLE,
    SESSION_TAKEN_OVER,
    TOPIC_ALIAS_INVALID,
    UNSPECIFIED_ERROR,
    connack_code_v3,
)
from roost.mqtt.retained import MQTTState
from roost.mqtt.states import State, advance
from roost.mqtt.subscriptions import Options, Subscriptions
from roost.mqtt.topics import (
    split_shared,
    validate_topic_filter,
    validate_topic_name,
)

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client, Consumer, Publisher, Session
    from roost.mqtt.aliases import OutgoingAliases

log = logging.getLogger("roost.mqtt")

QOS0, QOS1 = "qos0", "qos1"  # consumer tags of the two subscription queues
_PLAIN_TAGS: Final = frozenset({QOS0, QOS1})
TOPIC_ALIAS_MAXIMUM: Final = 64  # client-to-server aliases a connection may set
# a ReadGate reason of MQTT's own: packets after a SUBSCRIBE that declared a durable queue
# wait (unread) for its SUBACK, which waits for the disk
DEFINITION: Final = "definition"


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time and callbacks, handed in by the plumbing (the asyncio loop, or a test's)."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...


class MQTTTransport(Protocol):
    peer: str
    tls: bool
    # CN of the verified TLS client certificate, if any: a CONNECT without a user name
    # logs in as that user (RabbitMQ's mqtt.ssl_cert_login)
    cert_user: str | None

    def write(self, data: bytes) -> None: ...

    def close(self) -> None:
        """Flush what was written, then close."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


@dataclass(frozen=True)
class MQTTSettings:
    default_vhost: str = "/"
    prefetch: int = 100
    max_packet_size: int = 16 * 1024 * 1024
    connect_timeout: float = 10.0
    default_user: str = "guest"  # RabbitMQ's mqtt.default_user for anonymous clients
    default_password: str = "guest"
    max_keep_alive: int = 0  # seconds; 0: the client's keepalive stands (mqtt/limits.py)
    receive_maximum: int = 1024  # QoS 1/2 PUBLISHes of a connection awaiting their ack
    max_subscriptions: int = 1000  # topic filters per connection


def subscription_queue(client_id: str, qos: int) -> str:
    return f"mqtt-subscription-{client_id}qos{qos}"


class MQTTSession(ReadLoop):
    def __init__(
        self,
        port: AdapterPort,
        settings: MQTTSettings,
        transport: MQTTTransport,
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
        self._timers: dict[str, Timer] = {
            "connect": clock.call_later(settings.connect_timeout, self._connect_timeout)
        }
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

    # -- connecting -----------------------------------------------------------------------

    def _on_connect(self, p: Connect) -> None:
        self.level = p.protocol_level
        self.reader.protocol_level = p.protocol_level
        v5 = self.level == MQTT_5
        if v5 and p.properties.authentication_method is not None:
            raise MQTTError(BAD_AUTHENTICATION_METHOD, "enhanced authentication is not offered")
        client_id = p.client_id
        assigned = None
        if not client_id:
            if not p.clean_start and not v5:
                raise MQTTError(CLIENT_IDENTIFIER_NOT_VALID, "empty id without clean session")
            client_id = assigned = f"roost-{os.urandom(12).hex()}"
        username = p.username
        password = (p.password or b"").decode("utf-8", "replace")
        cert_user = self.transport.cert_user if username is None else None
        if username is None:
            username, password = self.settings.default_user, self.settings.default_password
        vhost = self.settings.default_vhost
        if ":" in username:  # RabbitMQ's "vhost:user"
            vhost, username = username.split(":", 1)
        try:
            user = login(
                self.port, username, password, external=cert_user is not None,
                cert_user=cert_user, peer=self.transport.peer, protocol=self.protocol,
            )  # fmt: skip
        except AccessRefused as exc:
            raise MQTTError(BAD_USER_NAME_OR_PASSWORD, exc.text) from exc
        if not self.port.has_vhost(vhost):
            raise MQTTError(NOT_AUTHORIZED, f"no vhost '{vhost}'")
        try:
            client = open_client(
                self.port, self.gate, user, vhost,
                protocol=f"{self.protocol} {_VERSIONS.get(self.level, '?')}",
                peer=self.transport.peer, closer=self.force_close,
                properties={"client_id": client_id}, traffic=self.traffic,
                tls=self.transport.tls,
                mechanism="EXTERNAL" if cert_user is not None else "PLAIN",
            )
        except AccessRefused as exc:
            raise MQTTError(NOT_AUTHORIZED, exc.text) from exc
        except BrokerError as exc:
            raise MQTTError(SERVER_UNAVAILABLE, exc.text) from exc
        self.client = client
        self.client_id = client_id
        self.key = (vhost, client_id)
        old = self.shared.sessions.get(self.key)
        if old is not None and old is not self:
            old.taken_over()
        self.shared.sessions[self.key] = self
        pending = self.shared.pending_wills.pop(self.key, None)
        if pending is not None:  # the session resumed within the will delay: no will
            pending.cancel()
        self.session = self.port.open_session(client, self)
        self.publisher = self.gate.publisher(self.port)
        self.will = p.will
        if v5:
            expiry = p.properties.session_expiry_interval or 0
            self._session_expiry = expiry
            self.persistent = bool(expiry)
            # the session's queues go that long after its last connection, as RabbitMQ 3.13
            # does it (0xFFFFFFFF: never)
            if 0 < expiry < 0xFFFFFFFF:
                self._queue_arguments = {"x-expires": expiry * 1000}
            self._max_out = p.properties.maximum_packet_size or 0
            # receive maximum: the client's bound on QoS 1 deliveries in flight
            self._prefetch = min(self._prefetch, p.properties.receive_maximum or 65535)
            if p.properties.receive_maximum:  # across all its queues (shared ones too)
                self.session.set_qos(p.properties.receive_maximum, True)
        else:
            self.persistent = not p.clean_start
        props = Properties()  # the CONNACK's (MQTT 5)
        agreed = negotiate(  # keepalive, aliases, response information (mqtt/limits.py)
            p, client_id, max_keep_alive=self.settings.max_keep_alive,
            receive_maximum=self.settings.receive_maximum, props=props,
        )
        self._aliases_out = agreed.aliases
        present = self._resume_or_clean(client, p.clean_start)
        self._timers.pop("connect").cancel()
        if agreed.keep_alive:
            self._keep_alive = agreed.keep_alive * 1.5  # the spec's "one and a half times"
            self._schedule(self._keep_alive + 0.01)
        if v5:
            props.assigned_client_identifier = assigned
            props.topic_alias_maximum = TOPIC_ALIAS_MAXIMUM
            props.maximum_packet_size = self.settings.max_packet_size
            props.retain_available = 1
            props.shared_subscription_available = 1
            props.subscription_identifier_available = 1
            props.maximum_qos = 1
        self._send(ConnAck(0, present, props))
        log.info(
            "%s: MQTT connection opened (user=%s vhost=%s client id=%s level=%d)",
            self.transport.peer, user.name, vhost, client_id, self.level,
        )

    def _resume_or_clean(self, client: Client, clean_start: bool) -> bool:
        """A clean start deletes what an earlier session left; a persistent session
        consumes the subscription queues it left and rejoins its shared groups, with the
        options its subscriptions had. Returns "session present"."""
        present = plain = False
        saved = self.shared.subscriptions.pop(self.key, None)
        if saved is not None and self.persistent and not clean_start:
            present = self._resume_subscriptions(saved)
        for qos in (0, 1):
            name = subscription_queue(self.client_id, qos)
            try:
                self.port.queue(client, name)
            except NotFound:
                continue
            if clean_start:
                self.port.delete_queue(client, name)
            elif self.persistent:
                present = plain = True
                self._consume(qos)
        if not plain:  # its queues expired meanwhile: the plain subscriptions went too
            self.subscriptions.forget_plain()
        return present

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
        self._timers["keepalive"] = self._clock.call_later(delay, self._check_keep_alive)

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

    # -- publishing -----------------------------------------------------------------------

    def _on_publish(self, p: Publish) -> None:
        assert self.client is not None
        topic = p.topic
        alias = p.properties.topic_alias if self.level == MQTT_5 else None
        if alias is not None:
            if not 0 < alias <= TOPIC_ALIAS_MAXIMUM:
                raise MQTTError(TOPIC_ALIAS_INVALID, f"topic alias {alias}", PUBLISH)
            if topic:
                self._aliases[alias] = topic
            else:
                topic = self._aliases.get(alias, "")
                if not topic:
                    raise MQTTError(TOPIC_ALIAS_INVALID, f"unknown topic alias {alias}", PUBLISH)
        validate_topic_name(topic)
        props = p.properties if self.level == MQTT_5 else None
        qos = min(p.qos, 1)
        marks = None
        if self.subscriptions.wants_publisher_mark:  # no-local needs to know it was us
            marks = {mapping.PUBLISHER_HEADER: self.client_id}
        message = mapping.message_from_publish(
            topic, p.payload, qos, props, retain=p.retain, marks=marks
        )
        if p.qos == 2 and p.packet_id in self._qos2:  # a resent QoS 2 PUBLISH: once only
            self._send(PubRec(p.packet_id or 0))
            return
        if p.qos and self.level == MQTT_5 and (
            self._acks_owed + len(self._qos2) >= self.settings.receive_maximum
        ):  # more than the Receive Maximum our CONNACK announced (mqtt/limits.py)
            raise MQTTError(RECEIVE_MAXIMUM_EXCEEDED, "too many QoS 1/2 PUBLISHes in flight")
        try:
            self._publish(p, message)
        except AccessRefused:
            if self.level != MQTT_5 or not p.qos:
                raise  # 3.x has no way to say it: the connection closes, as in RabbitMQ
            ack = PubRec if p.qos == 2 else PubAck
            self._send(ack(p.packet_id or 0, NOT_AUTHORIZED))
            return
        if p.retain:  # after the publish, whose permission check it shares
            self._retain(topic, message)
        self.gate.published()  # a resource alarm in effect blocks us now

    def _publish(self, p: Publish, message: Message) -> None:
        assert self.client is not None
        if p.qos == 0:
            self.port.publish(self.client, mapping.EXCHANGE, message, publisher=self.publisher)
            return
        pid = p.packet_id or 0
        self._in_publish = True
        self._acks_owed += 1
        if self._acks_owed >= self.settings.receive_maximum and self.level != MQTT_5:
            self.gate.pause_for(INFLIGHT)  # not read until acks go out (mqtt/limits.py)
        try:
            routed = self.port.publish(
                self.client, mapping.EXCHANGE, message,
                partial(self._confirmed, pid, p.qos), self.publisher,
            )
        except BaseException:
            self._owed_one_less()  # refused: no confirm will come
            raise
        finally:
            self._in_publish = False
        early, self._sync_acks = self._sync_acks, []
        for pid_, qos_, ok in early:
            self._ack_publish(pid_, qos_, ok, nobody=routed == 0)

    def _retain(self, topic: str, message: Message, client: Client | None = None) -> None:
        """Keep a retained message; a user who may not use the vhost's retained-message
        queue (mqtt/retained.py) still publishes, the message is just not retained."""
        client = client or self.client
        assert client is not None
        try:
            self.shared.retain(client, topic, message)
        except AccessRefused as exc:
            log.warning("%s: message not retained: %s", self.transport.peer, exc.text)

    def _confirmed(self, packet_id: int, qos: int, ok: bool) -> None:
        if self._in_publish:  # confirmed at once: answered with publish's routed count
            self._sync_acks.append((packet_id, qos, ok))
        elif not self.closed:
            self._ack_publish(packet_id, qos, ok, nobody=False)

    def _owed_one_less(self) -> None:
        self._acks_owed -= 1
        if self._acks_owed < self.settings.receive_maximum:
            self.gate.resume_for(INFLIGHT)

    def _ack_publish(self, packet_id: int, qos: int, ok: bool, *, nobody: bool) -> None:
        self._owed_one_less()
        if not ok and self.level != MQTT_5:
            self._fail(UNSPECIFIED_ERROR, "the message was not stored")
            return
        code = UNSPECIFIED_ERROR if not ok else NO_MATCHING_SUBSCRIBERS if nobody else 0
        if ok and self.client is not None:  # a PUBACK is MQTT's publisher confirm
            self.client.counts.confirmed += 1
        if self.level != MQTT_5:
            code = 0
        if qos == 2:
            self._qos2.add(packet_id)
            self._send(PubRec(packet_id, code))
        else:
            self._send(PubAck(packet_id, code))

    # -- subscribing ----------------------------------------------------------------------

    def _on_subscribe(self, p: Subscribe) -> None:
        assert self.client is not None
        completion = self.port.durable_from_here()
        codes: list[int] = []
        granted: list[tuple[str, int]] = []
        starts: list[Consumer] = []
        sub_ids = p.properties.subscription_identifiers
        for sub in p.subscriptions:
            try:
                validate_topic_filter(sub.topic_filter)
                if (len(self.subscriptions) >= self.settings.max_subscriptions
                        and not self.subscriptions.has(sub.topic_filter)):
                    raise MQTTError(QUOTA_EXCEEDED, "too many subscriptions")
                qos = min(sub.qos, 1)
                group = split_shared(sub.topic_filter)
                if group is None:
                    self._bind(sub.topic_filter, qos)
                else:
                    consumer = self._join(sub.topic_filter, group[0], group[1], qos)
                    if consumer is not None:
                        starts.append(consumer)
            except MQTTError as exc:
                codes.append(exc.reason_code)
                continue
            except AccessRefused:
                codes.append(NOT_AUTHORIZED)
                continue
            codes.append(qos)
            new = self.subscriptions.add(sub.topic_filter, Options(
                qos, sub.no_local, sub.retain_as_published, sub_ids[0] if sub_ids else None,
            ))
            # retain handling: 0 always, 1 only for a new subscription, 2 never; a shared
            # subscription gets none (spec 4.8.2)
            if group is None and (sub.retain_handling == 0 or (sub.retain_handling == 1 and new)):
                granted.append((sub.topic_filter, qos))
        for consumer in starts:
            assert self.session is not None
            self._clock.call_soon(self.session.start, consumer)  # after the SUBACK
        if self.persistent:  # kept for the session's next connection
            self.shared.subscriptions[self.key] = self.subscriptions
        done = partial(self._subscribed, p.packet_id, codes, granted)
        if completion.then(done):
            self.gate.pause_for(DEFINITION)  # later packets wait for the SUBACK
        else:
            done(None)

    def _subscribed(
        self, packet_id: int, codes: list[int], granted: list[tuple[str, int]],
        error: BrokerError | None,
    ) -> None:
        if self.closed:
            return
        if error is not None:
            self._fail(UNSPECIFIED_ERROR, "the subscription could not be stored")
            return
        self._send(SubAck(packet_id, codes))
        assert self.client is not None
        for topic_filter, qos in granted:
            try:
                matching = self.shared.matching(self.client, topic_filter)
            except AccessRefused as exc:
                log.warning("%s: no retained messages: %s", self.transport.peer, exc.text)
                matching = []
            for retained in matching:
                self._deliver_retained(retained.topic, retained.message, qos)
        self.gate.resume_for(DEFINITION)  # the packets after it, at the next loop turn

    def _bind(self, topic_filter: str, qos: int) -> None:
        assert self.client is not None
        key = mapping.routing_key(topic_filter)
        name = subscription_queue(self.client_id, qos)
        if qos not in self._consuming:
            self.port.declare_queue(
                self.client, name, durable=self.persistent, auto_delete=not self.persistent,
                arguments=self._queue_arguments,
            )
        self.port.bind_queue(self.client, name, mapping.EXCHANGE, key, {})
        other = subscription_queue(self.client_id, 1 - qos)
        self._unbind(other, key)  # a filter subscribed again at the other QoS moves
        if qos not in self._consuming:
            self._consume(qos)

    def _resume_subscriptions(self, saved: Subscriptions) -> bool:
        self.subscriptions = saved
        self.shared.subscriptions[self.key] = saved
        assert self.session is not None
        for consumer in shared.rejoin(saved, self._join, self.transport.peer):
            self._clock.call_soon(self.session.start, consumer)
        return bool(saved.shared)

    def _join(self, full_filter: str, group: str, topic_filter: str, qos: int) -> Consumer | None:
        assert self.client is not None and self.session is not None
        return shared.join(
            self.port, self.client, self.session, full_filter, group, topic_filter, qos,
            persistent=self.persistent, arguments=self._queue_arguments,
            prefetch=self._prefetch,
        )

    def _unbind(self, queue: str, key: str) -> bool:
        assert self.client is not None
        try:
            self.port.queue(self.client, queue)
            self.port.unbind_queue(self.client, queue, mapping.EXCHANGE, key, {})
        except NotFound:
            return False
        return True

    def _consume(self, qos: int) -> None:
        assert self.session is not None
        session = self.session
        session.prefetch_count = self._prefetch if qos else 0
        try:
            consumer = self.port.consume(
                session, subscription_queue(self.client_id, qos), QOS1 if qos else QOS0,
                no_ack=qos == 0, exclusive=False,
            )
        finally:
            session.prefetch_count = 0
        self._consuming.add(qos)
        self._clock.call_soon(session.start, consumer)  # after this packet's answer

    def _on_unsubscribe(self, p: Unsubscribe) -> None:
        codes = []
        for topic_filter in p.topic_filters:
            self.subscriptions.remove(topic_filter)
            if split_shared(topic_filter) is not None:
                assert self.session is not None
                found = [shared.leave(self.session, topic_filter)]
            else:
                key = mapping.routing_key(topic_filter)
                found = [self._unbind(subscription_queue(self.client_id, q), key) for q in (0, 1)]
            codes.append(0 if any(found) else NO_SUBSCRIPTION_EXISTED)
        self._send(UnsubAck(p.packet_id, codes if self.level == MQTT_5 else []))

    # -- delivering (core DeliverySink) ---------------------------------------------------

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        if self.closed:
            return
        topic = mapping.topic(message.routing_key)
        subs = self.subscriptions
        if consumer_tag in _PLAIN_TAGS and not subs.shaping:  # the hot path: no options
            acked, retain, identifiers = consumer_tag == QOS1, False, None
        else:  # options, identifiers, no local: mqtt/subscriptions.py
            how = subs.delivery(consumer_tag, QOS1, topic, message, self.client_id)
            acked, retain, identifiers = how.acked, how.retain, how.identifiers
            if not how.send:  # no-local: a message of our own, settled unseen
                if acked and self.session is not None:
                    self._settle_sent(delivery_tag)  # may deliver the next: no recursion
                return
        qos = min(mapping.published_qos(message), 1 if acked else 0)
        packet = Publish(topic, message.body, qos, dup=redelivered, retain=retain)
        if self.level == MQTT_5:
            packet.properties = mapping.properties_for_v5(message)
            if identifiers:
                packet.properties.subscription_identifiers = identifiers
        if qos:
            packet.packet_id = self._packet_id()
            self._inflight[packet.packet_id] = delivery_tag
        if not self._write_publish(packet):
            qos = 0
        if acked and not qos and self.session is not None:
            self._settle_sent(delivery_tag)
        elif qos and self.gate.flow_held:  # its PUBACK must be read: the socket may not wait
            self.gate.update_congestion()

    def _settle_sent(self, delivery_tag: int) -> None:
        """Ack a QoS 1 subscription's delivery that went out at QoS 0 (nothing will
        PUBACK it). The ack gives the queue credit to deliver the next one, which comes
        back here: acked one after another by the outermost call, not nested (a deep
        backlog of QoS 0 publishes raised RecursionError inside the publisher's read, the
        consumer stopped, its queue counted as stalled and let the publisher run free)."""
        tags = self._sent_tags
        tags.append(delivery_tag)
        if len(tags) > 1:
            return  # an outer call is settling: it takes this one next
        session = self.session
        assert session is not None
        try:
            while tags:
                session.ack(tags[0], False)  # may deliver (and append) the next one
                tags.popleft()
        finally:
            tags.clear()

    def _deliver_retained(self, topic: str, message: Message, sub_qos: int) -> None:
        qos = min(mapping.published_qos(message), sub_qos)
        packet = Publish(topic, message.body, qos, retain=True)
        if self.level == MQTT_5:
            packet.properties = mapping.properties_for_v5(message)
            ids = self.subscriptions.matching_ids(topic)
            if ids:
                packet.properties.subscription_identifiers = ids
        if qos:
            packet.packet_id = self._packet_id()
            self._inflight[packet.packet_id] = 0
        self._write_publish(packet)

    def _write_publish(self, packet: Publish) -> bool:
        """Send a delivery, by topic alias where the client allows them; False when it
        is above the client's maximum packet size (MQTT 5: dropped, as if sent)."""
        aliases = self._aliases_out
        assigned = aliases.apply(packet) if aliases is not None else None
        data = encode(packet, self.level)
        if self._max_out and len(data) > self._max_out:
            self._inflight.pop(packet.packet_id or 0, None)
            if assigned is not None and aliases is not None:
                aliases.undo(assigned)  # the client never learned it
            return False
        self.traffic.send_oct += len(data)
        self.traffic.send_cnt += 1
        self.transport.write(data)
        return True

    def _packet_id(self) -> int:
        """The next free packet id, 1..65535 (prefetch keeps far fewer in flight)."""
        pid = self._next_id
        while True:
            pid = pid % 65535 + 1
            if pid not in self._inflight:
                self._next_id = pid
                return pid

    def consumer_cancelled(self, consumer_tag: str) -> None:
        if not self.closed:
            self._fail(UNSPECIFIED_ERROR, "a subscription queue was deleted")

    def close_with(self, error: BrokerError) -> None:
        if not self.closed:
            self._fail(UNSPECIFIED_ERROR, error.text)

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
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
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


_VERSIONS: Final = {3: "3.1", 4: "3.1.1", 5: "5.0"}
