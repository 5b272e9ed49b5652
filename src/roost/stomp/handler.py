"""One STOMP connection as a core client: the sans-IO session, independent of its
plumbing (TCP or WebSocket) and of any event loop.

Bytes go in through ``receive`` (or ``data_received``); what the session does in reply
comes back as effects (stomp/effects.py): the bytes of its frames, closing, aborting,
pausing and resuming input, taken by the plumbing (stomp/protocol.py, stomp/ws.py) with
``take_effects`` after each read and, when ``wake`` says so, after deliveries and timers.
Timers are effects too (``StartTimer``, ``StopTimer``; the plumbing calls
``timer_fired``); the time, and the turns of the read gate, are the ``Clock`` the
plumbing hands in. What a frame may do in each state is the table of stomp/states.py. A
connection is one core Client with one core Session (the DeliverySink), reached through
the adapter port. Every error (malformed frame, limit, refused operation) is an ERROR
frame followed by a close, as the STOMP spec asks; other connections are not affected.

Here: input, CONNECT, errors and close. The rest is in the parts it inherits:
stomp/output.py (effects out), sending.py, subscribing.py, delivering.py (MESSAGE, ACK,
NACK), transactions.py, heartbeats.py; session_state.py declares what they share.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from roost import __version__, lifecycle
from roost.backpressure import ReadGate
from roost.core import AdapterPort, Traffic
from roost.core.errors import AccessRefused, BrokerError
from roost.lifecycle import ReadLoop, open_client, release
from roost.stomp.delivering import Delivering
from roost.stomp.effects import ABORT, PAUSE, RESUME, Close, Effect, StartTimer, StopTimer
from roost.stomp.error_names import ERROR_NAMES
from roost.stomp.errors import StompError
from roost.stomp.frames import (
    NEED_DATA,
    VERSIONS,
    Frame,
    FrameParser,
    StompParseError,
)
from roost.stomp.heartbeats import BEAT_TICKS, BEAT_TIMER, CHECK_TIMER, Heartbeats
from roost.stomp.output import Output, no_wake
from roost.stomp.sending import Sending
from roost.stomp.settings import StompSettings
from roost.stomp.states import CONNECTED_FRAMES, State, advance
from roost.stomp.subscribing import Subscribing
from roost.stomp.subscription import Kept, SubscriptionWithOptions
from roost.stomp.transactions import Transactions
from roost.stomp.transport import Clock, Endpoint

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client, Queue, Session
    from roost.stomp.destinations import Destination

__all__ = ["StompHandler", "StompSettings"]  # what stomp/protocol.py, ws.py, the server use
log = logging.getLogger("roost.stomp")

# frames that may change durable definitions: their receipt waits for the disk
DEFINES = frozenset({"SUBSCRIBE", "UNSUBSCRIBE"})
# frames whose handler sends the RECEIPT itself (COMMIT after the fsync, DISCONNECT
# before the close)
_OWN_RECEIPT = frozenset({"COMMIT", "DISCONNECT"})
_TRANSACTIONAL = frozenset({"SEND", "ACK", "NACK"})
# a connected session's own frames: tested without looking (state, command) up in
# states.TRANSITIONS, whose Enum key's hash is a Python-level call (1% of STOMP 1/1)
_CONNECTED: Final = State.CONNECTED
_STAY_CONNECTED: Final = frozenset(CONNECTED_FRAMES)
CONNECT_TIMER = "connect"  # the CONNECT deadline (settings.connect_timeout)


class StompHandler(ReadLoop, Output, Sending, Subscribing, Delivering, Transactions, Heartbeats):
    def __init__(
        self,
        broker: AdapterPort,
        settings: StompSettings,
        endpoint: Endpoint,
        registry: set[Any],
        *,
        clock: Clock,
        wake: Callable[[bool], None] | None = None,
        protocol: str = "STOMP",
    ) -> None:
        self.broker = broker
        self.settings = settings
        self.endpoint = endpoint  # who the peer is (the plumbing: TCP or WebSocket)
        # what the session asks of the plumbing, in order (stomp/effects.py), until it
        # takes them; ``wake`` tells it effects were made outside a read: False for the
        # first since the last take, True when they are due now
        self.effects: list[Effect] = []
        self._effect_bytes = 0
        self._wake = wake or no_wake
        self.registry = registry
        self.protocol = protocol
        self.parser = FrameParser(settings.limits)
        self.version = "1.0"
        self.client: Client | None = None
        self.session: Session | None = None
        # id -> what is kept of a subscription (stomp/subscription.py); its MESSAGE head
        self.subscriptions: dict[str, Kept] = {}
        self.tag_subscription: dict[int, SubscriptionWithOptions] = {}
        self._heads: dict[str, bytes] = {}
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
        self._beat_tick = 0.0  # heart-beat periods negotiated at CONNECT (heartbeats.py)
        self._check_interval = 0.0
        # when the socket is read: queues congested by our SENDs, resource alarms, a
        # turn's worth of work done (roost/backpressure.py, shared by every protocol;
        # sans-IO like this session: its pauses are this session's effects, its time the clock)
        self.gate = ReadGate(self, clock)
        self.publisher = self.gate.publisher(broker)
        self._going_away = False  # the server is stopping (shutdown)
        registry.add(self)
        self._effect(StartTimer(CONNECT_TIMER, settings.connect_timeout))

    # -- input ----------------------------------------------------------------------------

    # (the read path is lifecycle.ReadLoop's: data_received → work → gate.read_done)

    def timer_fired(self, name: str) -> None:
        """A timer this session started (``StartTimer``) is due."""
        if name == BEAT_TIMER:
            self._send_heartbeat(self._beat_tick)
        elif name == CHECK_TIMER:
            self._check_heartbeat(self._check_interval)
        elif name == CONNECT_TIMER:
            self._connect_timeout()

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
        except StompParseError as exc:  # (a name per type: one name has one type compiled)
            self._error(exc.message, exc.detail)
        except StompError as refused:
            self._error(refused.message, refused.detail, frame)
        except BrokerError as broken:
            # RabbitMQ's body: "ACCESS_REFUSED - access to queue 'q' in vhost '/' refused…"
            name = ERROR_NAMES.get(type(broken), "internal_error")
            self._error(name, f"{name.upper()} - {broken.text}", frame)
        except Exception:
            log.exception("%s: internal error while handling %r", self.endpoint.peer, frame)
            self._error("internal_error", "internal error", frame)
        if gate.holding and not self.closed:
            gate.update_congestion()  # acks in this batch may have changed the answer

    def _handle(self, frame: Frame) -> None:
        command = frame.command
        state = self.state
        after: State
        if state is _CONNECTED and command in _STAY_CONNECTED:
            after = state  # the steady path, without a (state, command) key and its Enum hash
        else:  # advance raises the StompError when the frame may not come now
            after = advance(state, command)
        if self.client is None:
            if self._connect(frame):  # not "self.client is not None": None to mypyc here
                self.state = after
            return
        handler = _HANDLERS[command]
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
        elif command == "SEND":  # the two frames of every message: native calls, where
            self.on_send(frame)  # the table's are Python-level ones
        elif command == "ACK":
            self.on_ack(frame)
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

    # -- errors (output is stomp/output.py) ---------------------------------------------

    def _error(
        self,
        message: str,
        detail: str = "",
        frame: Frame | None = None,
        *,
        receipt: str | None = None,
    ) -> None:
        log.warning("%s: STOMP error: %s %s", self.endpoint.peer, message, detail)
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
        self._effect(Close(self._going_away))

    # -- connection -----------------------------------------------------------------------

    def _connect(self, frame: Frame) -> bool:  # whether the client is connected now
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
            return False
        self.version = common[-1]
        self.parser.version = self.version
        self._ack_key = "id" if self.version == "1.2" else "message-id"
        login = frame.get("login")
        passcode = frame.get("passcode", "")
        cert_user = self.endpoint.cert_user
        external = login is None and cert_user is not None
        username = login
        if username is None:  # RabbitMQ's default_user for clients that send no login
            username, passcode = self.settings.default_user, self.settings.default_passcode
        try:
            user = lifecycle.login(self.broker, username, passcode or "", external=external,
                                   cert_user=cert_user, peer=self.endpoint.peer,
                                   protocol=self.protocol)  # fmt: skip
        except AccessRefused as exc:
            raise StompError("access_refused", "Bad CONNECT: authentication failed") from exc
        vhost = frame.get("host") or "/"
        if not self.broker.has_vhost(vhost):
            # stomp.py sends the server's host name by default: RabbitMQ refuses that
            # ("Virtual host '…' access denied"), Roost takes "/" (docs/stomp.md)
            log.info("%s: host %r is not a vhost: using '/'", self.endpoint.peer, vhost)
            vhost = "/"
        self.client = open_client(
            self.broker,
            self.gate,
            user,
            vhost,
            protocol=f"{self.protocol} {self.version}",
            peer=self.endpoint.peer,
            closer=self.force_close,
            properties={"product": frame.get("client-id", "STOMP client")},
            traffic=self.traffic,
            tls=self.endpoint.tls,
            mechanism="EXTERNAL" if external else "PLAIN",
        )
        self.session = self.broker.open_session(self.client, self)
        self._effect(StopTimer(CONNECT_TIMER))
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
            self._beat_tick = send_ms / 1000 / BEAT_TICKS
            self._effect(StartTimer(BEAT_TIMER, self._beat_tick))
        if expect_ms:
            self._check_interval = expect_ms / 1000
            self._effect(StartTimer(CHECK_TIMER, self._check_interval))
        log.debug("%s: STOMP %s negotiated", self.endpoint.peer, self.version)
        return True

    def _connect_timeout(self) -> None:
        if self.client is None and not self.closed:
            self.close_reason = "no CONNECT in time"
            self._release()
            self._effect(ABORT)

    def on_disconnect(self, frame: Frame) -> None:
        receipt = frame.get("receipt")
        if receipt is not None:
            self.write_frame("RECEIPT", [("receipt-id", receipt)])
        self.close_reason = "client sent DISCONNECT"
        self._close()

    # -- helpers and closing --------------------------------------------------------------

    def _release(self) -> None:
        """Give back what the connection holds: unacked messages requeue at once."""
        if self.closed:
            return
        self.closed = True
        for name in (CONNECT_TIMER, BEAT_TIMER, CHECK_TIMER):
            self._effect(StopTimer(name))
        self.transactions.clear()
        self.registry.discard(self)
        # the core's connection registry logs the close, with the reason
        release(self.broker, self.client, self.close_reason, self.gate)

    # -- input flow control (roost/backpressure.py) -----------------------------------------

    def pause_reading(self) -> None:
        self._effect(PAUSE)

    def resume_reading(self) -> None:
        self._effect(RESUME)

    def owes_acks(self) -> bool:
        """Deliveries await ACKs on this connection: congestion must not pause it."""
        return self.session is not None and self.session.unacked_count > 0

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        log.info("%s: blocked by resource alarm(s): %s", self.endpoint.peer,
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
        self._effect(ABORT)


# command -> its handler (not in the class: a compiled class holds no such dict)
_HANDLERS: dict[str, Callable[[StompHandler, Frame], None]] = {
    "SEND": StompHandler.on_send,
    "SUBSCRIBE": StompHandler.on_subscribe,
    "UNSUBSCRIBE": StompHandler.on_unsubscribe,
    "ACK": StompHandler.on_ack,
    "NACK": StompHandler.on_nack,
    "BEGIN": StompHandler.on_begin,
    "COMMIT": StompHandler.on_commit,
    "ABORT": StompHandler.on_abort,
    "DISCONNECT": StompHandler.on_disconnect,
}
