"""The stream-protocol session: sans-IO, on the core's adapter port.

Fed bytes (``data_received``), it reads frames with the codec, checks each against the
state table (``STATES`` in states.py: what a client may send before and after it is
authenticated, tuned and opened), calls the port, and writes frames through its
transport; time and timers come from the ``Clock`` the plumbing hands in
(``protocol.py``; those types and the settings are in ``settings.py``). Publishing and
the commands on streams are in ``commands.py``; subscriptions in ``consumers.py``.

When the socket is read is the ``ReadGate``'s (roost/backpressure.py, as for AMQP and
STOMP): a congested queue, a resource alarm after a publish, and a bounded turn of work
per read (``FRAMES_PER_TURN`` frames or one large read, then the next loop turn). Two
more reasons of this protocol's own hold it too: ``UNCONFIRMED`` (more than
``max_unconfirmed`` publishes await their confirms, read again once ``unblock_credits``
of them are confirmed, as RabbitMQ's publishing credits work) and
``COMPLETION`` (a Create or Delete becomes durable: the frames behind it wait unread in
the codec, so a connection's operations keep their order).

A frame the codec refuses, or one not allowed in the connection's state, ends that
connection only, with the protocol's response code in a Close (UNKNOWN_FRAME,
FRAME_TOO_LARGE), as RabbitMQ does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from roost.backpressure import ReadGate
from roost.core import AccessRefused, AdapterPort, BrokerError, Traffic
from roost.lifecycle import ReadLoop, login, open_client, plain_credentials, release
from roost.stream_protocol import constants as c
from roost.stream_protocol.codec import FrameReader, _NeedData, encode
from roost.stream_protocol.commands import Commands
from roost.stream_protocol.error_counts import NAMES, error_codes
from roost.stream_protocol.errors import StreamProtocolError
from roost.stream_protocol.frames import (
    Close,
    ExchangeCommandVersions,
    ExchangeCommandVersionsResponse,
    Frame,
    Heartbeat,
    Open,
    OpenResponse,
    PeerProperties,
    PeerPropertiesResponse,
    Publish,
    Response,
    SaslAuthenticate,
    SaslAuthenticateResponse,
    SaslHandshake,
    SaslHandshakeResponse,
    Tune,
)
from roost.stream_protocol.settings import Clock, StreamSettings, Timer, Transport
from roost.stream_protocol.states import (
    CLOSED,
    ONLY_ONCE,
    OPEN,
    OPENING,
    PEER,
    SASL,
    STATES,
    TUNING,
    VERSIONS,
)

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client

log = logging.getLogger("roost.stream_protocol")

PROTOCOL = "RabbitMQ Stream"
# a reason of the session's own for the gate to stay shut (commands.UNCONFIRMED another)
COMPLETION = "completion"


class StreamSession(ReadLoop):
    def __init__(
        self, port: AdapterPort, settings: StreamSettings, transport: Transport, clock: Clock
    ) -> None:
        self.port = port
        self.settings = settings
        self.transport = transport
        self.clock = clock
        self.state = PEER
        self.closed = False  # the state is CLOSED
        self.reader = FrameReader(role="server", frame_max=c.DEFAULT_INITIAL_FRAME_MAX)
        self.client: Client | None = None
        self.user: Any = None
        self.mechanism = ""
        self.frame_max = settings.frame_max
        self.heartbeat = settings.heartbeat
        self.close_reason = ""
        self.traffic = Traffic()
        # when the socket is read (roost/backpressure.py); Commands' publisher is the gate's
        self.gate = ReadGate(self, clock)
        self.commands = Commands(self)
        self._properties: dict[str, str] = {}
        self._received = True  # something arrived since the last heartbeat check
        self._missed = False  # the last interval was silent
        self._timers: list[Timer] = []
        self._waiting = 0  # completions pending

    # -- input ----------------------------------------------------------------------------

    # (the read path is lifecycle.ReadLoop's: data_received → work → gate.read_done)

    def heard(self) -> None:
        self._received = True

    def feed(self, data: bytes) -> None:
        self.reader.feed(data)

    def work(self) -> None:
        """Handle the frames read so far while the gate is open, a turn's worth at most;
        the rest wait in the codec (and the socket is not read) until it opens again."""
        gate = self.gate
        try:
            while gate.open and self.state != CLOSED:
                frame = self.reader.next_frame()
                if isinstance(frame, _NeedData):
                    break
                self._dispatch(frame)
                gate.left -= 1
                if not gate.left:
                    gate.end_turn()
        except StreamProtocolError as exc:
            log.warning("%s: stream protocol error: %s", self.transport.peer, exc)
            self.close_with(exc.response_code, str(exc))
        if self.state != CLOSED:
            self.commands.flush_publishes()  # the Publish frames gathered in this turn
        if gate.holding and self.state != CLOSED:
            gate.update_congestion()  # credit in this batch may have changed the answer

    def _dispatch(self, frame: Frame) -> None:
        if type(frame) is not Publish:
            self.commands.flush_publishes()  # what was gathered goes before this
        allowed = STATES[self.state]
        if (object not in allowed and not isinstance(frame, allowed)) or (
            self.state == OPEN and isinstance(frame, ONLY_ONCE)
        ):
            self.close_with(
                c.UNKNOWN_FRAME, f"{type(frame).__name__} not allowed in state {self.state}"
            )
            return
        handler = self._handlers.get(type(frame))
        if handler is not None:
            handler(self, frame)
        else:
            self.commands.handle(frame)

    def hold_until(self, done: Callable[[], None]) -> Callable[[BaseException | None], None]:
        """A completion's callback that runs ``done``; until it does, the frames behind
        this one wait unread (a connection's operations keep their order while a change
        becomes durable), then they are handled on the loop's next turn."""
        self._waiting += 1
        self.gate.pause_for(COMPLETION)

        def finished(_error: BaseException | None) -> None:
            self._waiting -= 1
            if self.state != CLOSED:
                done()
            if not self._waiting:
                self.gate.resume_for(COMPLETION)

        return finished

    # -- input flow control (roost/backpressure.py) -----------------------------------------

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.state != CLOSED:
            self.transport.resume_reading()

    def owes_acks(self) -> bool:
        """A subscription's chunks wait for the client's Credit, which comes on this
        socket (a stream's "ack"): congestion must not stop reading it."""
        return any(sub.pending for sub in self.commands.subscriptions.values())

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        log.info("%s: blocked by resource alarm(s): %s", self.transport.peer,
                 ", ".join(sorted(alarms)))

    def alarm_unblocked(self) -> None:
        pass  # the stream protocol has no frame for it: the socket is simply read again

    # -- output ---------------------------------------------------------------------------

    def send(self, frame: Frame) -> None:
        data = encode(frame)
        for code in error_codes(frame):  # RabbitMQ's stream error counters
            self.port.count_protocol_error("stream", NAMES[code])
        self.write(data)

    def write(self, data: bytes | memoryview) -> None:
        if self.state == CLOSED:
            return
        self.traffic.send_oct += len(data)
        self.traffic.send_cnt += 1
        self.transport.write(data)

    # -- the handshake ----------------------------------------------------------------------

    def _peer_properties(self, f: PeerProperties) -> None:
        self._properties = dict(f.properties)
        self.state = SASL
        props = {"product": "Roost", "platform": "Python", "connection_name": "roost-stream"}
        self.send(PeerPropertiesResponse(f.correlation_id, c.OK, props))

    def _sasl_handshake(self, f: SaslHandshake) -> None:
        mechanisms = ["PLAIN"] + (["EXTERNAL"] if self.transport.cert_user else [])
        self.send(SaslHandshakeResponse(f.correlation_id, c.OK, mechanisms))

    def _sasl_authenticate(self, f: SaslAuthenticate) -> None:
        cert_user = self.transport.cert_user
        try:
            if f.mechanism == "PLAIN":
                credentials = plain_credentials(f.data, errors="strict")
                if credentials is None:
                    self.send(SaslAuthenticateResponse(f.correlation_id, c.SASL_ERROR))
                    return
                name, password = credentials
                self.user = login(self.port, name, password, external=False, cert_user=None,
                                  peer=self.transport.peer, protocol=PROTOCOL)  # fmt: skip
            elif f.mechanism == "EXTERNAL" and cert_user:
                self.user = login(self.port, cert_user, "", external=True, cert_user=cert_user,
                                  peer=self.transport.peer, protocol=PROTOCOL)  # fmt: skip
            else:
                code = c.SASL_MECHANISM_NOT_SUPPORTED
                self.send(SaslAuthenticateResponse(f.correlation_id, code))
                return
        except (AccessRefused, UnicodeDecodeError) as exc:
            reason = exc.text if isinstance(exc, AccessRefused) else "bad credentials"
            code = (
                c.SASL_AUTHENTICATION_FAILURE_LOOPBACK
                if "via localhost" in reason
                else c.AUTHENTICATION_FAILURE
            )
            self.send(SaslAuthenticateResponse(f.correlation_id, code))
            self.close_with(code, reason)
            return
        self.mechanism = f.mechanism
        self.state = TUNING
        self.send(SaslAuthenticateResponse(f.correlation_id, c.OK))
        self.send(Tune(self.settings.frame_max, self.settings.heartbeat))

    def _tune(self, f: Tune) -> None:
        if self.state == TUNING:
            # the smaller non-zero value of each side, as RabbitMQ negotiates
            def least(ours: int, theirs: int) -> int:
                return min(v for v in (ours, theirs) if v) if ours or theirs else 0

            self.frame_max = least(self.settings.frame_max, f.frame_max)
            self.heartbeat = least(self.settings.heartbeat, f.heartbeat)
            self.reader.frame_max = self.frame_max
            self.state = OPENING
            if self.heartbeat:
                self._timers.append(self.clock.call_later(self.heartbeat, self._beat))

    def _open(self, f: Open) -> None:
        vhost = f.virtual_host or "/"
        try:
            if not self.port.has_vhost(vhost):
                raise AccessRefused(f"no vhost '{vhost}'")
            self.client = open_client(
                self.port,
                self.gate,
                self.user,
                vhost,
                protocol=f"{PROTOCOL} 1.0",
                peer=self.transport.peer,
                closer=self.force_close,
                properties=dict(self._properties),
                traffic=self.traffic,
                tls=self.transport.tls,
                mechanism=self.mechanism,
            )
        except BrokerError as exc:
            self.send(OpenResponse(f.correlation_id, c.VIRTUAL_HOST_ACCESS_FAILURE))
            self.close_with(c.VIRTUAL_HOST_ACCESS_FAILURE, exc.text)
            return
        self.state = OPEN
        advertised = {
            "advertised_host": self.settings.advertised_host,
            "advertised_port": str(self.settings.advertised_port),
        }
        self.send(OpenResponse(f.correlation_id, c.OK, advertised))
        log.info(
            "%s: stream connection opened (user=%s vhost=%s)",
            self.transport.peer,
            self.user.name,
            vhost,
        )

    def _exchange_versions(self, f: ExchangeCommandVersions) -> None:
        self.send(ExchangeCommandVersionsResponse(f.correlation_id, c.OK, list(VERSIONS)))

    def _heartbeat(self, f: Heartbeat) -> None:
        pass  # arriving is enough (self._received)

    def _close(self, f: Close) -> None:
        self.send(Response(c.CLOSE, f.correlation_id, c.OK))
        self.close_reason = f"closed by the client ({f.reason})" if f.reason else "client closed"
        self._finish()

    def _beat(self) -> None:
        """Every heartbeat interval: send one, and close after two silent intervals."""
        if self.state == CLOSED:
            return
        if self.gate.paused:  # its heartbeats wait unread in the socket
            self._received = True
        if not self._received and self._missed:
            self.close_reason = "missed heartbeats from the client"
            self._finish()
            return
        self._missed = not self._received
        self._received = False
        self.send(Heartbeat())
        # the timer that called this has fired: keep only the next one, or a connection
        # with heartbeats would hold one handle per interval for as long as it lives
        self._timers[:] = [self.clock.call_later(self.heartbeat, self._beat)]

    _handlers: dict[type, Callable[[StreamSession, Any], None]] = {
        PeerProperties: _peer_properties,
        SaslHandshake: _sasl_handshake,
        SaslAuthenticate: _sasl_authenticate,
        Tune: _tune,
        Open: _open,
        ExchangeCommandVersions: _exchange_versions,
        Heartbeat: _heartbeat,
        Close: _close,
    }

    # -- the end ----------------------------------------------------------------------------

    def close_with(self, code: int, reason: str) -> None:
        """End the connection from the server's side: Close with the code, then the socket."""
        if self.state == CLOSED:
            return
        self.send(Close(1, code, reason[:200]))
        self.close_reason = self.close_reason or f"{c.response_name(code)}: {reason}"
        self._finish()

    def force_close(self, reason: str) -> None:
        """The broker closes us (management API, a deleted user or vhost, shutdown)."""
        self.close_with(c.INTERNAL_ERROR if "shutdown" in reason else c.OK, reason)

    def _finish(self) -> None:
        self._release()
        self.transport.close()

    def connection_lost(self) -> None:
        self.close_reason = self.close_reason or "client closed the socket"
        self._release()

    def _release(self) -> None:
        if self.state == CLOSED:
            return
        self.state = CLOSED
        self.closed = True
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self.commands.release()
        release(self.port, self.client, self.close_reason, self.gate)
        self.client = None
