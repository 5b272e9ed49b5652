"""One STOMP connection as a core client: the sans-IO session, independent of its
transport (TCP or WebSocket) and of any event loop.

Bytes go in through ``data_received``; frames come out through ``StompTransport.write``;
closing, aborting and pausing input are asked of the transport, and time and timers of
the ``Clock`` the plumbing hands in (stomp/protocol.py, stomp/ws.py). What a frame may
do in each state is the table of stomp/states.py. A connection is one core Client with
one core Session (the DeliverySink), reached through the adapter port. Every error
(malformed frame, limit, refused operation) is an ERROR frame followed by a close, as the
STOMP spec asks; other connections are not affected.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol

from roost import __version__, lifecycle
from roost.backpressure import ReadGate
from roost.core import ACK_TIMEOUT, AdapterPort, Message, Traffic
from roost.core.errors import (
    AccessRefused,
    BrokerError,
    NotAllowed,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
)
from roost.lifecycle import ReadLoop, open_client, release
from roost.stomp import arguments as stomp_arguments
from roost.stomp import destinations
from roost.stomp.destinations import PREFIX_ARGUMENT, Destination, DestinationError
from roost.stomp.errors import StompError
from roost.stomp.frames import (
    NEED_DATA,
    VERSIONS,
    Frame,
    FrameParser,
    Limits,
    StompParseError,
    header_lines,
    serialize,
)
from roost.stomp.mapping import properties_from_headers, property_lines
from roost.stomp.states import TRANSITIONS, State, advance

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client, Queue, Session

log = logging.getLogger("roost.stomp")
_CACHE_SIZE = 1024  # destinations remembered per connection
_GONE: Final = object()  # a default of dict.pop that no entry holds
# what an ack:auto subscription has outstanding: always nothing, so all of them share
# this one (nothing is ever added to it: deliver records tags only for client acks)
_NONE_OUTSTANDING: Final[dict[int, None]] = {}

# core error -> ERROR frame message header (RabbitMQ's words)
ERROR_NAMES: dict[type[BrokerError], str] = {
    NotFound: "not_found",
    AccessRefused: "access_refused",
    ResourceLocked: "resource_locked",
    PreconditionFailed: "precondition_failed",
    NotAllowed: "not_allowed",
}
ACK_MODES = ("auto", "client", "client-individual")
# frames that may change durable definitions: their receipt waits for the disk
DEFINES = frozenset({"SUBSCRIBE", "UNSUBSCRIBE"})
# frames whose handler sends the RECEIPT itself (COMMIT after the fsync, DISCONNECT
# before the close)
_OWN_RECEIPT = frozenset({"COMMIT", "DISCONNECT"})
_TRANSACTIONAL = frozenset({"SEND", "ACK", "NACK"})
_BEAT_TICKS = 4  # heart-beat checks per promised period (_send_heartbeat)


class Timer(Protocol):
    def cancel(self) -> None: ...

    def cancelled(self) -> bool: ...


class Clock(Protocol):
    """Time and callbacks, handed in by the plumbing (the asyncio loop is one; a test's
    fake clock is another): the session itself does no I/O and owns no event loop."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer: ...

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object: ...


class StompTransport(Protocol):
    """What the handler needs from TCP or WebSocket."""

    peer: str
    # CN of the verified TLS client certificate, if any: a CONNECT without login logs in
    # as that user (RabbitMQ's stomp.ssl_cert_login)
    cert_user: str | None
    tls: bool

    def write(self, data: bytes) -> None: ...

    def close(self, *, going_away: bool = False) -> None:
        """Flush what was written, then close; ``going_away`` when the server is stopping
        (WebSocket close code 1001)."""

    def abort(self) -> None: ...

    def pause_reading(self) -> None:
        """Read no more input until ``resume_reading`` (roost/backpressure.py)."""

    def resume_reading(self) -> None: ...


@dataclass(frozen=True)
class StompSettings:
    limits: Limits = field(default_factory=Limits)
    heartbeat_ms: int = 1000  # the smallest interval the server offers to send/expect
    connect_timeout: float = 10.0
    default_user: str = "guest"
    default_passcode: str = "guest"


@dataclass(slots=True)  # one per subscription: 100,000 of them are common (bench/rss_bench.py)
class Subscription:
    id: str
    destination: str
    queue: str
    ack: str
    ack_timeout: float = 0.0  # the core requeues what is not acked in time
    # consumer arguments from the SUBSCRIBE headers (a stream's x-stream-offset, …)
    arguments: dict[str, Any] = field(default_factory=lambda: stomp_arguments.NONE)
    # delivery tags not yet acknowledged by the client, in delivery order (ack:auto
    # subscriptions share an empty one)
    outstanding: dict[int, None] = field(default_factory=lambda: _NONE_OUTSTANDING)
    # encoded once, at the first delivery: "MESSAGE" and the subscription header; the
    # destination header when it is the subscription's own (a temp queue), else empty
    head: bytes = b""
    destination_line: bytes = b""


class StompHandler(ReadLoop):
    def __init__(
        self,
        broker: AdapterPort,
        settings: StompSettings,
        transport: StompTransport,
        registry: set[Any],
        *,
        clock: Clock,
        protocol: str = "STOMP",
    ) -> None:
        self.broker = broker
        self.settings = settings
        self.transport = transport
        self.registry = registry
        self.protocol = protocol
        self.parser = FrameParser(settings.limits)
        self.version = "1.0"
        self.client: Client | None = None
        self.session: Session | None = None
        self.subscriptions: dict[str, Subscription] = {}
        self.tag_subscription: dict[int, Subscription] = {}
        self.transactions: dict[str, list[Callable[[], None]]] = {}
        self.temp_queues: dict[str, str] = {}  # /temp-queue/NAME -> queue name
        # per-connection caches, as RabbitMQ's STOMP plugin keeps: parsed destinations,
        # and the queues SEND declared (declared again once deleted)
        self._destinations: dict[str, Destination] = {}
        self._sent_to: dict[str, Queue] = {}
        self._destination_lines: dict[tuple[str, str], bytes] = {}  # a MESSAGE's
        self._ack_key = "id"  # the header an ACK names its message by (1.2; else message-id)
        self.traffic = Traffic()
        self.close_reason = ""
        self.closed = False
        self.state = State.AWAITING_CONNECT
        self._clock = clock
        self._max_tag = 0
        self._heard = self._clock.time()
        self._wrote = False
        self._silent_ticks = 0  # heart-beat ticks with nothing written (_send_heartbeat)
        self._timers: list[Timer] = []
        self._timers.append(self._clock.call_later(settings.connect_timeout, self._connect_timeout))
        # when the socket is read: queues congested by our SENDs, resource alarms, a
        # turn's worth of work done (roost/backpressure.py, shared by every protocol;
        # sans-IO like this session: it pauses through the transport, times on the clock)
        self.gate = ReadGate(self, clock)
        self.publisher = self.gate.publisher(broker)
        self._going_away = False  # the server is stopping (shutdown)
        registry.add(self)

    # -- input ----------------------------------------------------------------------------

    # (the read path is lifecycle.ReadLoop's: data_received → work → gate.read_done)

    def heard(self) -> None:
        self._heard = self._clock.time()

    def feed(self, data: bytes) -> None:
        self.parser.feed(data)

    def work(self) -> None:
        """Handle the frames read so far while the gate is open, a turn's worth at most;
        what is left waits in the parser (and the socket is not read) until it opens."""
        parser = self.parser
        gate = self.gate
        frame: Any = None
        try:
            while gate.open and not self.closed:
                frame = parser.next_frame()
                if frame is NEED_DATA:
                    break
                self._handle(frame)
                gate.left -= 1
                if not gate.left:
                    gate.end_turn()
        except StompParseError as exc:
            self._error(exc.message, exc.detail)
        except StompError as exc:
            self._error(exc.message, exc.detail, frame)
        except BrokerError as exc:
            # RabbitMQ's body: "ACCESS_REFUSED - access to queue 'q' in vhost '/' refused…"
            name = ERROR_NAMES.get(type(exc), "internal_error")
            self._error(name, f"{name.upper()} - {exc.text}", frame)
        except Exception:
            log.exception("%s: internal error while handling %r", self.transport.peer, frame)
            self._error("internal_error", "internal error", frame)
        if gate.holding and not self.closed:
            gate.update_congestion()  # acks in this batch may have changed the answer

    def _handle(self, frame: Frame) -> None:
        command = frame.command
        after = TRANSITIONS.get((self.state, command))
        if after is None:  # the frame may not come now: advance raises the StompError
            after = advance(self.state, command)
        if self.client is None:
            self._connect(frame)
            if self.client is not None:
                self.state = after
            return
        handler = self._handlers[command]
        self.state = after
        headers = frame.headers
        # a frame that may declare a durable queue: its receipt waits for the disk
        completion = self.broker.durable_from_here() if command in DEFINES else None
        tx = headers.get("transaction")
        if tx is not None and command in _TRANSACTIONAL:
            work = self.transactions.get(tx)
            if work is None:
                raise StompError("invalid transaction", f"transaction '{tx}' is not active")
            work.append(lambda: handler(self, frame))
        else:
            handler(self, frame)
        if command == "SEND":
            self.gate.published()  # a resource alarm in effect blocks us now
        receipt = headers.get("receipt")
        if receipt is None or command in _OWN_RECEIPT or self.closed:
            return
        # a SUBSCRIBE that declared a durable queue: the receipt means it survives a
        # crash, so it waits for the group commit that writes the definition
        if completion is None or not completion.then(partial(self._defined, receipt)):
            self.write_frame("RECEIPT", [("receipt-id", receipt)])

    def _defined(self, receipt: str, error: BrokerError | None) -> None:
        if self.closed:
            return
        if error is None:
            self.write_frame("RECEIPT", [("receipt-id", receipt)])
        else:
            self._error("definitions not stored", "the queue could not be written to disk")

    # -- output ---------------------------------------------------------------------------

    def write_frame(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        self.write(serialize(command, headers, body, version=self.version))

    def write(self, data: bytes) -> None:
        self.traffic.send_oct += len(data)
        self.traffic.send_cnt += 1
        self._wrote = True
        self.transport.write(data)

    def _error(
        self,
        message: str,
        detail: str = "",
        frame: Frame | None = None,
        *,
        receipt: str | None = None,
    ) -> None:
        log.warning("%s: STOMP error: %s %s", self.transport.peer, message, detail)
        headers = [("message", message), ("content-type", "text/plain")]
        if frame is not None and receipt is None:
            receipt = frame.get("receipt")
        if receipt is not None:
            headers.append(("receipt-id", receipt))
        self.write_frame("ERROR", headers, detail.encode())
        self.close_reason = f"{message}: {detail}" if detail else message
        self._close()

    def _close(self) -> None:
        self._release()
        self.transport.close(going_away=self._going_away)

    # -- connection -----------------------------------------------------------------------

    def _connect(self, frame: Frame) -> None:
        accepted = (frame.get("accept-version") or "1.0").split(",")
        common = [v for v in VERSIONS if v in {a.strip() for a in accepted}]
        if not common:
            self.write_frame(
                "ERROR",
                [("version", ",".join(VERSIONS)), ("message", "unsupported version")],
                f"Supported protocol versions are {' '.join(VERSIONS)}".encode(),
            )
            self.close_reason = "unsupported STOMP version"
            self._close()
            return
        self.version = common[-1]
        self.parser.version = self.version
        self._ack_key = "id" if self.version == "1.2" else "message-id"
        login = frame.get("login")
        passcode = frame.get("passcode", "")
        cert_user = self.transport.cert_user
        external = login is None and cert_user is not None
        username = login
        if username is None:  # RabbitMQ's default_user for clients that send no login
            username, passcode = self.settings.default_user, self.settings.default_passcode
        try:
            user = lifecycle.login(self.broker, username, passcode or "", external=external,
                                   cert_user=cert_user, peer=self.transport.peer,
                                   protocol=self.protocol)  # fmt: skip
        except AccessRefused as exc:
            raise StompError("access_refused", "Bad CONNECT: authentication failed") from exc
        vhost = frame.get("host") or "/"
        if not self.broker.has_vhost(vhost):
            # stomp.py sends the server's host name by default: RabbitMQ refuses that
            # ("Virtual host '…' access denied"), Roost takes "/" (docs/stomp.md)
            log.info("%s: host %r is not a vhost: using '/'", self.transport.peer, vhost)
            vhost = "/"
        self.client = open_client(
            self.broker,
            self.gate,
            user,
            vhost,
            protocol=f"{self.protocol} {self.version}",
            peer=self.transport.peer,
            closer=self.force_close,
            properties={"product": frame.get("client-id", "STOMP client")},
            traffic=self.traffic,
            tls=self.transport.tls,
            mechanism="EXTERNAL" if external else "PLAIN",
        )
        self.session = self.broker.open_session(self.client, self)
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        send_ms, expect_ms = self._negotiate_heartbeat(frame.get("heart-beat") or "0,0")
        self.write_frame(
            "CONNECTED",
            [
                ("version", self.version),
                ("heart-beat", f"{send_ms},{expect_ms}"),
                ("server", f"Roost/{__version__}"),
                ("session", f"session-{self.client.id}-{os.urandom(4).hex()}"),
            ],
        )
        if send_ms:
            tick = send_ms / 1000 / _BEAT_TICKS
            self._schedule(tick, self._send_heartbeat, tick)
        if expect_ms:
            self._schedule(expect_ms / 1000, self._check_heartbeat, expect_ms / 1000)
        log.debug("%s: STOMP %s negotiated", self.transport.peer, self.version)

    def _negotiate_heartbeat(self, value: str) -> tuple[int, int]:
        """(server sends every, server expects every) in ms, as the spec computes them."""
        try:
            cx, cy = (int(v) for v in value.split(","))
        except ValueError as exc:
            raise StompError("invalid heart-beat header", repr(value)) from exc
        if cx < 0 or cy < 0:
            raise StompError("invalid heart-beat header", repr(value))
        floor = self.settings.heartbeat_ms
        send = max(cy, floor) if cy else 0
        expect = max(cx, floor) if cx else 0
        if self.version == "1.0":
            return 0, 0
        return send, expect

    def _schedule(self, delay: float, fn: Callable[[float], None], arg: float) -> None:
        self._timers = [t for t in self._timers if not t.cancelled()]
        self._timers.append(self._clock.call_later(delay, fn, arg))

    def _send_heartbeat(self, tick: float) -> None:
        """Every quarter of the promised period: after two ticks with nothing written, a
        heart-beat. The last write came after the tick before those two, so the silence
        stays under three ticks (3/4 of the period) with a quarter left for timer jitter;
        an idle connection gets one every half period, as from RabbitMQ."""
        if self.closed:
            return
        if self._wrote:
            self._wrote = False
            self._silent_ticks = 0
        else:
            self._silent_ticks += 1
            if self._silent_ticks >= 2:
                self.write(b"\n")
                self._wrote = False
                self._silent_ticks = 0
        self._schedule(tick, self._send_heartbeat, tick)

    def _check_heartbeat(self, interval: float) -> None:
        if self.closed:
            return
        if self.gate.paused:  # its heart-beats wait unread in the socket
            self._heard = self._clock.time()
        silent = self._clock.time() - self._heard
        if silent > 2 * interval:  # the spec's "some tolerance": two whole intervals
            log.warning("%s: missed heart-beats from client", self.transport.peer)
            self._error("heart-beat timeout", f"no data from the client for {silent:.1f}s")
            return
        self._schedule(interval / 2, self._check_heartbeat, interval)

    def _connect_timeout(self) -> None:
        if self.client is None and not self.closed:
            self.close_reason = "no CONNECT in time"
            self._release()
            self.transport.abort()

    def on_disconnect(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            self.write_frame("RECEIPT", [("receipt-id", receipt)])
        self.close_reason = "client sent DISCONNECT"
        self._close()

    # -- sending --------------------------------------------------------------------------

    def on_send(self, frame: Frame) -> None:
        assert self.client is not None
        dest_text = frame.headers.get("destination")
        if dest_text is None:
            dest_text = self._require(frame, "destination")  # raises
        if dest_text.startswith("/control/"):
            self._control(frame, dest_text)
            return
        dest = self._parse(dest_text)
        headers = frame.headers
        reply_to = headers.get("reply-to")
        if reply_to is not None and reply_to.startswith("/temp-queue/"):
            # AMQP clients see the queue's name (they publish the reply to it); STOMP
            # clients see /reply-queue/<name> (headers_from_properties), as in RabbitMQ
            headers = {**headers, "reply-to": self._temp_queue(reply_to)}
        if dest.kind == "queue":
            self._declare_for_send(dest.name, frame.headers)
            exchange, key = "", dest.name
        elif dest.kind == "temp-queue":
            exchange, key = "", self._temp_queue(dest_text)
        else:
            exchange, key = dest.publish_exchange, dest.publish_key
        message = Message(exchange, key, properties_from_headers(headers), frame.body)
        receipt = frame.headers.get("receipt")
        if receipt is None or "transaction" in frame.headers:
            # in a transaction the receipt went out when the SEND was buffered
            self.broker.publish(self.client, exchange, message, publisher=self.publisher)
            return
        # Like an AMQP confirm, the receipt waits for the store's group-commit fsync when
        # the message went to a durable queue; the dispatcher must not send it now.
        del frame.headers["receipt"]
        self.broker.publish(
            self.client,
            exchange,
            message,
            partial(self._stored, receipt),
            self.publisher,
            refused=partial(self._refused, receipt),
        )

    def _declare_for_send(self, name: str, headers: dict[str, str]) -> None:
        """SEND to /queue/NAME declares it (durable) the first time, not on every frame
        (a SEND with x- argument headers always declares: its arguments are checked)."""
        assert self.client is not None
        queue = self._sent_to.get(name)
        if queue is not None and not queue.deleted and stomp_arguments.none_in(headers):
            return
        arguments = stomp_arguments.queue_arguments(headers)
        queue = self.broker.declare_queue(self.client, name, durable=True, arguments=arguments)
        if len(self._sent_to) >= _CACHE_SIZE:
            self._sent_to.clear()
        self._sent_to[name] = queue

    def _refused(self, receipt: str, reason: str) -> None:
        """A queue or exchange refused the message (overflow reject-publish, a mutator):
        its receipt is an ERROR naming why, and the connection closes (RabbitMQ's STOMP
        plugin closes it too, without a frame). ``_stored(False)`` follows, unheard."""
        if not self.closed:
            self._error("message refused", reason, receipt=receipt)

    def _stored(self, receipt: str, ok: bool) -> None:
        if self.closed:
            return
        if ok:
            self.write_frame("RECEIPT", [("receipt-id", receipt)])
            return
        self.write_frame(
            "ERROR",
            [("message", "message not stored"), ("receipt-id", receipt)],
            b"the broker could not write the message to disk",
        )
        self.close_reason = "message not stored"
        self._close()

    def _control(self, frame: Frame, dest_text: str) -> None:
        """ocamlmq's control destinations: counts answered in the RECEIPT."""
        assert self.client is not None
        receipt = self._require(frame, "receipt")
        frame.headers.pop("receipt")  # answered here, with the count
        _, _, rest = dest_text.partition("/control/")
        what, _, target = rest.partition("/")
        dest = self._parse("/" + target)
        if what == "count-msgs" and dest.kind == "queue":
            count = self.broker.queue(self.client, dest.name).message_count
            self.write_frame("RECEIPT", [("receipt-id", receipt), ("num-messages", str(count))])
        elif what == "count-subscribers" and dest.kind == "queue":
            count = len(self.broker.queue(self.client, dest.name).consumers)
            self.write_frame("RECEIPT", [("receipt-id", receipt), ("num-subscribers", str(count))])
        elif what == "count-subscribers" and dest.kind == "topic":
            count = self._count_topic_subscribers(dest.name)
            self.write_frame("RECEIPT", [("receipt-id", receipt), ("num-subscribers", str(count))])
        else:
            raise StompError("invalid control destination", dest_text)

    def _count_topic_subscribers(self, key: str) -> int:
        """STOMP subscriptions on this broker whose destination is /topic/KEY."""
        dest = f"/topic/{key}"
        return sum(
            1
            for handler in self.registry
            if isinstance(handler, StompHandler)
            for sub in handler.subscriptions.values()
            if sub.destination == dest
        )

    def _temp_queue(self, dest_text: str) -> str:
        """The connection's private queue for /temp-queue/NAME, subscribed on first use."""
        assert self.client is not None and self.session is not None
        name = self.temp_queues.get(dest_text)
        if name is None:
            name = f"stomp-temp-{os.urandom(12).hex()}"
            self.broker.declare_queue(self.client, name, exclusive=True, auto_delete=True)
            self.temp_queues[dest_text] = name
            sub = Subscription(dest_text, dest_text, name, "auto")
            self._consume(sub, 0)
        return name

    # -- subscribing ----------------------------------------------------------------------

    def on_subscribe(self, frame: Frame) -> None:
        assert self.client is not None
        dest_text = self._require(frame, "destination")
        sub_id = frame.get("id") or (dest_text if self.version == "1.0" else None)
        if sub_id is None:
            raise StompError("missing 'id' header", "SUBSCRIBE needs an id in STOMP 1.1+")
        if sub_id in self.subscriptions:
            raise StompError("duplicate subscription id", f"'{sub_id}' is already subscribed")
        ack = frame.get("ack", "auto")
        if ack not in ACK_MODES:
            raise StompError("invalid ack mode", f"'{ack}' is not one of {', '.join(ACK_MODES)}")
        prefetch_text = frame.get("prefetch-count") or frame.get("prefetch") or "0"
        if not prefetch_text.isdigit():
            raise StompError("invalid prefetch-count", repr(prefetch_text))
        timeout_text = frame.get("ack-timeout")
        try:
            ack_timeout = float(timeout_text) if timeout_text else 0.0
        except ValueError as exc:
            raise StompError("invalid ack-timeout", repr(timeout_text)) from exc
        dest = self._parse(dest_text, cache=False)  # rarely subscribed to twice
        queue = self._subscription_queue(dest, dest_text, sub_id, frame)
        sub = Subscription(
            sub_id,
            dest_text,
            queue,
            ack,
            ack_timeout,
            arguments=stomp_arguments.consumer_arguments(frame.headers),
            outstanding=_NONE_OUTSTANDING if ack == "auto" else {},
        )
        self._consume(sub, int(prefetch_text))

    def _subscription_queue(
        self, dest: Destination, dest_text: str, sub_id: str, frame: Frame
    ) -> str:
        assert self.client is not None
        broker, client = self.broker, self.client
        if dest.kind == "queue":
            arguments = stomp_arguments.queue_arguments(frame.headers)
            broker.declare_queue(client, dest.name, durable=True, arguments=arguments)
            return dest.name
        if dest.kind in ("amq-queue", "reply-queue"):
            broker.queue(client, dest.name)  # must exist
            return dest.name
        if dest.kind == "temp-queue":
            raise StompError("invalid destination", "subscribe to a temp-queue via reply-to")
        durable = (frame.get("durable") or frame.get("persistent") or "").lower() == "true"
        # a prefix subscription is routed by amq.topic itself (a prefix binding): no
        # message outside the prefix reaches its queue
        prefix = dest.prefix is not None
        if dest.kind == "topic":
            exchange, key = "amq.topic", (dest.prefix or dest.name)
        else:
            exchange, key = dest.name, dest.key
        if durable and frame.get("id"):
            name = frame.get("x-queue-name") or destinations.durable_subscription_queue(
                dest_text, sub_id
            )
            broker.declare_queue(client, name, durable=True)
        else:
            name = f"stomp-subscription-{os.urandom(12).hex()}"
            broker.declare_queue(client, name, exclusive=True, auto_delete=True)
        binding_arguments = {PREFIX_ARGUMENT: True} if prefix else stomp_arguments.NONE
        broker.bind_queue(client, name, exchange, key, binding_arguments)
        if prefix and durable:  # bound with '#' by a Roost that filtered in deliver
            broker.unbind_queue(client, name, exchange, "#", {})
        return name

    def _consume(self, sub: Subscription, prefetch: int) -> None:
        assert self.session is not None
        session = self.session
        session.prefetch_count = prefetch
        if sub.destination.startswith("/temp-queue/"):
            sub.destination_line = header_lines([("destination", sub.destination)], self.version)
        # the subscription's ack-timeout is the consumer's default deadline (core.features.
        # consumer_timeout); a message's own ack-timeout header wins over it
        arguments = sub.arguments
        if sub.ack_timeout > 0:
            arguments = {**arguments, ACK_TIMEOUT: sub.ack_timeout}
        try:
            consumer = self.broker.consume(
                session,
                sub.queue,
                sub.id,
                no_ack=sub.ack == "auto",
                exclusive=False,
                arguments=arguments,
            )
        finally:
            session.prefetch_count = 0
        self.subscriptions[sub.id] = sub
        self._clock.call_soon(session.start, consumer)  # after this frame's RECEIPT

    def on_unsubscribe(self, frame: Frame) -> None:
        assert self.session is not None and self.client is not None
        sub_id = frame.get("id") or (frame.get("destination") if self.version == "1.0" else None)
        sub = self.subscriptions.pop(sub_id or "", None)
        if sub is None:
            raise StompError("unknown subscription", f"no subscription '{sub_id}'")
        self.session.cancel(sub.id)
        self._settle(sub, list(sub.outstanding), requeue=True)
        if (frame.get("durable") or frame.get("persistent") or "").lower() == "true":
            self.broker.delete_queue(self.client, sub.queue)

    # -- delivering (core DeliverySink) ---------------------------------------------------

    def deliver(
        self, consumer_tag: str, delivery_tag: int, redelivered: bool, message: Message
    ) -> None:
        sub = self.subscriptions.get(consumer_tag)
        if sub is None:
            return
        # the frame from parts encoded once (per subscription, destination, message)
        tag = str(delivery_tag).encode()
        parts = [
            sub.head or self._head(sub),
            sub.destination_line or self._destination_line(message.exchange, message.routing_key),
            b"message-id:",
            tag,
            b"\n",
        ]
        if redelivered:
            parts.append(b"redelivered:true\n")
        if sub.ack != "auto":
            if self.version == "1.2":
                parts += (b"ack:", tag, b"\n")
            self._max_tag = delivery_tag
            sub.outstanding[delivery_tag] = None
            self.tag_subscription[delivery_tag] = sub
            if self.gate.flow_held:  # its ack must be read: the socket may not wait
                self.gate.update_congestion()
        parts.append(property_lines(message.properties, self.version))
        body = message.body
        if body:  # the frame in one join: a 1 KiB body is copied once, not twice
            parts += (b"content-length:", str(len(body)).encode(), b"\n\n", body, b"\x00")
        else:
            parts.append(b"\n\x00")
        self.write(b"".join(parts))

    def _head(self, sub: Subscription) -> bytes:
        """A subscription's MESSAGE line and subscription header, encoded at its first
        delivery (an idle subscription keeps no copy)."""
        sub.head = b"MESSAGE\n" + header_lines([("subscription", sub.id)], self.version)
        return sub.head

    def _destination_line(self, exchange: str, routing_key: str) -> bytes:
        """The encoded ``destination`` header of a MESSAGE published to these."""
        line = self._destination_lines.get((exchange, routing_key))
        if line is None:
            dest = destinations.for_message(exchange, routing_key)
            line = header_lines([("destination", dest)], self.version)
            if len(self._destination_lines) >= _CACHE_SIZE:
                self._destination_lines.clear()
            self._destination_lines[exchange, routing_key] = line
        return line

    def consumer_cancelled(self, consumer_tag: str) -> None:
        sub = self.subscriptions.pop(consumer_tag, None)
        if sub is not None:
            self._error("subscription cancelled", f"the queue of '{sub.destination}' was deleted")

    def close_with(self, error: BrokerError) -> None:
        """The core ends the session: a delivery was not acknowledged in time."""
        if not self.closed:
            self._error("delivery acknowledgement timed out", error.text)

    # -- acknowledging --------------------------------------------------------------------

    def on_ack(self, frame: Frame) -> None:
        self._ack_or_nack(frame, None)

    def on_nack(self, frame: Frame) -> None:
        requeue = (frame.get("requeue") or "true").lower() != "false"
        self._ack_or_nack(frame, requeue)

    def _ack_or_nack(self, frame: Frame, requeue: bool | None) -> None:
        key = self._ack_key
        text = frame.headers.get(key)
        if text is None:
            text = self._require(frame, key)  # raises
        if not text.isdigit():
            raise StompError("invalid ack", f"unknown {key} '{text}'")
        tag = int(text)
        sub = self.tag_subscription.pop(tag, None)
        if sub is None or sub.outstanding.pop(tag, _GONE) is _GONE:
            if 0 < tag <= self._max_tag:
                return  # settled already: nothing to do
            raise StompError("invalid ack", f"unknown {key} '{text}'")
        if sub.ack != "client":  # the one message, already popped from both maps
            self._settle_in_session(tag, requeue)
            return
        # client mode is cumulative over the whole connection, as RabbitMQ's adapter does
        # it (multiple=true on the connection's one channel): every older message of every
        # subscription goes with this one (this tag was popped above)
        subs = self.tag_subscription
        for older in [t for t in subs if t < tag]:
            self._settle_tag(subs[older], older, requeue)
        self._settle_in_session(tag, requeue)

    def _settle(self, sub: Subscription, tags: list[int], *, requeue: bool | None) -> None:
        """requeue None = ack; True = back to the queue; False = discard."""
        for tag in tags:
            self._settle_tag(sub, tag, requeue)

    def _settle_tag(self, sub: Subscription, tag: int, requeue: bool | None) -> None:
        sub.outstanding.pop(tag, None)
        self.tag_subscription.pop(tag, None)
        self._settle_in_session(tag, requeue)

    def _settle_in_session(self, tag: int, requeue: bool | None) -> None:
        assert self.session is not None
        if requeue is None:
            self.session.ack(tag, False)
        else:
            self.session.nack(tag, False, requeue)

    # -- transactions ---------------------------------------------------------------------

    def on_begin(self, frame: Frame) -> None:
        tx = self._require(frame, "transaction")
        if tx in self.transactions:
            raise StompError("invalid transaction", f"transaction '{tx}' is already active")
        self.transactions[tx] = []

    def on_commit(self, frame: Frame) -> None:
        tx = self._require(frame, "transaction")
        work = self.transactions.pop(tx, None)
        if work is None:
            raise StompError("invalid transaction", f"transaction '{tx}' is not active")
        # like AMQP's tx.commit-ok, the receipt waits for the fsync of what the
        # transaction's SENDs wrote to durable queues
        receipt = frame.get("receipt")
        completion = self.broker.durable_from_here()
        for op in work:
            op()
        if not completion.then(partial(self._committed, receipt)):
            self._committed(receipt, None)

    def _committed(self, receipt: str | None, _error: BrokerError | None) -> None:
        if receipt is None or self.closed:
            return
        self.write_frame("RECEIPT", [("receipt-id", receipt)])

    def on_abort(self, frame: Frame) -> None:
        tx = self._require(frame, "transaction")
        if self.transactions.pop(tx, None) is None:
            raise StompError("invalid transaction", f"transaction '{tx}' is not active")

    # -- helpers and closing --------------------------------------------------------------

    @staticmethod
    def _require(frame: Frame, name: str) -> str:
        value = frame.get(name)
        if value is None:
            raise StompError(f"missing '{name}' header", f"{frame.command} needs '{name}'")
        return value

    def _parse(self, text: str, *, cache: bool = True) -> Destination:
        dest = self._destinations.get(text)
        if dest is not None:
            return dest
        try:
            dest = destinations.parse(text)
        except DestinationError as exc:
            raise StompError("invalid destination", str(exc)) from exc
        if not cache:
            return dest
        if len(self._destinations) >= _CACHE_SIZE:
            self._destinations.clear()
        self._destinations[text] = dest
        return dest

    def _release(self) -> None:
        """Give back what the connection holds: unacked messages requeue at once."""
        if self.closed:
            return
        self.closed = True
        for timer in self._timers:
            timer.cancel()
        self.transactions.clear()
        self.registry.discard(self)
        # the core's connection registry logs the close, with the reason
        release(self.broker, self.client, self.close_reason, self.gate)

    # -- input flow control (roost/backpressure.py) -----------------------------------------

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def owes_acks(self) -> bool:
        """Deliveries await ACKs on this connection: congestion must not pause it."""
        return self.session is not None and self.session.unacked_count > 0

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        log.info("%s: blocked by resource alarm(s): %s", self.transport.peer,
                 ", ".join(sorted(alarms)))

    def alarm_unblocked(self) -> None:
        pass  # STOMP has no frame for it: the socket is simply read again

    def connection_lost(self) -> None:
        self.close_reason = self.close_reason or "client closed the socket"
        self._release()

    def force_close(self, reason: str) -> None:
        """Close from the broker side (management API, a deleted user or vhost)."""
        if not self.closed:
            self._error("connection closed by the broker", reason)

    def shutdown(self, reason: str = "shutdown") -> None:
        """The server is stopping: the same ERROR, then a "going away" close."""
        self._going_away = True
        self.force_close(reason)

    def _abort(self, reason: str) -> None:
        self.close_reason = self.close_reason or reason
        self._release()
        self.transport.abort()

    _handlers: dict[str, Callable[[StompHandler, Frame], None]] = {
        "SEND": on_send,
        "SUBSCRIBE": on_subscribe,
        "UNSUBSCRIBE": on_unsubscribe,
        "ACK": on_ack,
        "NACK": on_nack,
        "BEGIN": on_begin,
        "COMMIT": on_commit,
        "ABORT": on_abort,
        "DISCONNECT": on_disconnect,
    }
