"""asyncio Protocol for AMQP 0-9-1: owns the socket, batches writes, runs the timers.

Frames go through the sans-IO ``ServerConnection``; methods go to ``AMQPChannel``. All
frames in a ``data_received`` are parsed in one pass and every byte produced while doing
so is written with one ``transport.write``; deliveries caused by other connections are
written once per loop iteration (``call_soon``).
"""

from __future__ import annotations

import asyncio
import logging
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from roost import __version__
from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    FrameReader,
    decode_table,
    encode_heartbeat,
    encode_method_frame,
)
from roost.amqp.connection import (
    BadHeader,
    ChannelMethod,
    ConnectionMethod,
    ContentReceived,
    HeaderReceived,
    ServerConnection,
    State,
)
from roost.amqp.errors import AMQPError, ChannelError, ConnectionError, FrameError, reply_text
from roost.amqp.handlers import AMQPChannel, ConnectionContext, to_amqp_error
from roost.backpressure import ReadGate
from roost.core import AdapterPort, Traffic
from roost.core.errors import AccessRefused, BrokerError
from roost.tls import certificate_user

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client

log = logging.getLogger("roost.amqp")

CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "consumer_priorities": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
    "direct_reply_to": True,
}

CLOSE_TIMEOUT = 3.0  # seconds to wait for close-ok before dropping the socket
# Pending output beyond this is written at once, so the transport's high-water mark can
# pause deliveries (pause_writing) instead of a backlog piling up in our own list.
FLUSH_AT = 256 * 1024
# connection.blocked's reason, as RabbitMQ words it, by the alarm in effect
BLOCKED_REASONS = (("memory", "low on memory"), ("disk", "low on disk"))


_CHANNEL_LIFECYCLE = frozenset(
    (m.ChannelOpen.INDEX, m.ChannelClose.INDEX, m.ChannelCloseOk.INDEX)
)


@dataclass(frozen=True)
class AMQPLimits:
    channel_max: int = 2047
    frame_max: int = 131072
    heartbeat: int = 60
    max_message_size: int = 128 * 1024 * 1024
    handshake_timeout: float = 10.0


def server_properties() -> dict[str, Any]:
    return {
        "product": "Roost",
        "version": __version__,
        "platform": f"Python {platform.python_version()}",
        "copyright": "Roost developers",
        "information": "Licensed under the Apache License 2.0",
        "cluster_name": f"roost@{platform.node()}",
        "capabilities": dict(CAPABILITIES),
    }


def parse_credentials(mechanism: str, response: bytes) -> tuple[str, str]:
    """(username, password) from a PLAIN or AMQPLAIN start-ok response."""
    if mechanism == "PLAIN":
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise AccessRefused("malformed PLAIN response")
        return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if mechanism == "AMQPLAIN":
        # a field table without its length prefix (what pika and py-amqp send)
        table, _ = decode_table(
            memoryview(len(response).to_bytes(4, "big") + response), 0
        )
        user, password = table.get("LOGIN", ""), table.get("PASSWORD", "")
        if isinstance(user, bytes):
            user = user.decode("utf-8", "replace")
        if isinstance(password, bytes):
            password = password.decode("utf-8", "replace")
        return str(user), str(password)
    raise ConnectionError(
        m.COMMAND_INVALID,
        reply_text(m.COMMAND_INVALID, f"unknown authentication mechanism '{mechanism}'"),
        10,
        11,
    )


class AMQPServerProtocol(asyncio.Protocol):
    def __init__(self, broker: AdapterPort, limits: AMQPLimits, registry: set[Any]) -> None:
        self.broker = broker
        self.limits = limits
        self.registry = registry
        self.reader = FrameReader(frame_max=limits.frame_max)
        self.conn = ServerConnection(
            channel_max=limits.channel_max,
            frame_max=limits.frame_max,
            heartbeat=limits.heartbeat,
            max_message_size=limits.max_message_size,
        )
        self.channels: dict[int, AMQPChannel] = {}
        self.client: Client | None = None  # set by connection.open
        self.frame_max = limits.frame_max
        self.cancel_notify = False
        self.peer = "?"
        self.close_reason = ""
        self.traffic = Traffic()  # bytes in/out for the management API, from the first byte
        self._user: Any = None
        self.tls = False  # the socket is a TLS one (AMQPS)
        self.cert_user: str | None = None  # CN of a verified client certificate (EXTERNAL)
        self.auth_mechanism = ""
        self._client_properties: dict[str, Any] = {}
        self._auth_failure_close = False
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_event_loop()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._in_receive = False
        self._flush_scheduled = False
        self._confirm_channels: set[AMQPChannel] = set()
        self._closing = False  # no more input will be processed
        self._timer: asyncio.TimerHandle | None = None
        self._heard = True
        self._wrote = False
        self._missed = 0
        # when the socket is read: congested queues, resource alarms, a turn's worth of
        # work done (roost/backpressure.py, shared by every protocol)
        self.gate = ReadGate(self, self._loop)
        self._blocked_notify = False  # the client's connection.blocked capability

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = transport.get_extra_info("ssl_object") is not None
        self.cert_user = certificate_user(transport) if self.tls else None
        self.registry.add(self)
        self._timer = self._loop.call_later(self.limits.handshake_timeout, self._handshake_timeout)
        log.debug("%s: accepted AMQP connection", self.peer)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._heard = True
        traffic = self.traffic
        traffic.recv_oct += len(data)
        traffic.recv_cnt += 1
        self.reader.feed(data)
        self.work()
        self.gate.read_done(len(data))

    def work(self) -> None:
        """Handle the frames read so far while the gate is open, a turn's worth at most;
        what is left waits in the reader (and the socket is not read) until it opens."""
        if self._closing:
            return
        reader = self.reader
        gate = self.gate
        self._in_receive = True
        frame: Any = None
        try:
            while gate.open and not self._closing:
                frame = reader.next_frame()
                if frame is NEED_DATA:
                    break
                try:
                    event = self.conn.receive(frame)
                    if event is not None:
                        self._handle(event)
                except ChannelError as exc:
                    self._channel_error(frame.channel, exc)
                gate.left -= 1
                if not gate.left:
                    gate.end_turn()
        except FrameError as exc:
            self._protocol_error(exc, fatal=True)
        except ConnectionError as exc:
            self._protocol_error(exc, fatal=False)
        except Exception:
            log.exception("%s: internal error while handling %r", self.peer, frame)
            self._protocol_error(
                ConnectionError(m.INTERNAL_ERROR, reply_text(m.INTERNAL_ERROR, "internal error")),
                fatal=False,
            )
        finally:
            self._in_receive = False
            if gate.holding:
                gate.update_congestion()  # acks in this batch may have changed the answer
            self._flush()

    def eof_received(self) -> bool:
        self.close_reason = self.close_reason or "client closed the socket"
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.close_reason:
            self.close_reason = f"connection lost ({exc})" if exc else "client closed the socket"
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._release()
        self.gate.close()
        self.registry.discard(self)
        if self.client is None:  # an open connection's close is logged by the core's registry
            log.info("%s: connection closed before open: %s", self.peer, self.close_reason)

    def pause_writing(self) -> None:
        for channel in self.channels.values():
            channel.session.set_writable(False)

    def resume_writing(self) -> None:
        for channel in list(self.channels.values()):
            channel.session.set_writable(True)

    # -- input flow control (roost/backpressure.py) ---------------------------------------

    def pause_reading(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.pause_reading()

    def resume_reading(self) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def owes_acks(self) -> bool:
        """Deliveries await acks on this socket: congestion must not pause it."""
        return any(ch.session.unacked_count for ch in self.channels.values())

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        if self._blocked_notify:
            reason = next(
                (text for name, text in BLOCKED_REASONS if name in alarms), "low on resources"
            )
            self.write(encode_method_frame(0, m.ConnectionBlocked(reason=reason)))
        log.info("%s: blocked by resource alarm(s): %s", self.peer, ", ".join(sorted(alarms)))

    def alarm_unblocked(self) -> None:
        if self._blocked_notify and self.conn.state is State.OPEN:
            self.write(encode_method_frame(0, m.ConnectionUnblocked()))

    # -- output ----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        self._out.append(data)
        self._out_bytes += len(data)
        if self._out_bytes >= FLUSH_AT:
            self._flush()
        elif not self._in_receive and not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def confirms_pending(self, channel: AMQPChannel) -> None:
        self._confirm_channels.add(channel)
        if not self._in_receive and not self._flush_scheduled:  # settled after an fsync
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._confirm_channels:
            for channel in self._confirm_channels:
                channel.flush_confirms()
            self._confirm_channels.clear()
        out = self._out
        if not out:
            return
        self._out = []
        self._out_bytes = 0
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        transport.write(data)
        traffic = self.traffic
        traffic.send_oct += len(data)
        traffic.send_cnt += 1
        self._wrote = True

    # -- events ----------------------------------------------------------------------------

    def _handle(self, event: object) -> None:
        cls = type(event)
        if cls is ContentReceived:
            channel = self.channels.get(event.channel)  # type: ignore[attr-defined]
            if channel is not None:  # None: released by an error or a close we sent
                channel.publish(event.method, event.properties, event.body)  # type: ignore[attr-defined]
            self.gate.published()  # a resource alarm in effect blocks us now
        elif cls is ChannelMethod:
            self._channel_method(event.channel, event.method)  # type: ignore[attr-defined]
        elif cls is ConnectionMethod:
            self._connection_method(event.method)  # type: ignore[attr-defined]
        elif cls is HeaderReceived:
            self._header_received()
        elif cls is BadHeader:
            log.warning("%s: bad protocol header %r", self.peer, event.raw)  # type: ignore[attr-defined]
            self.close_reason = "bad protocol header"
            self.write(PROTOCOL_HEADER)
            self._finish()

    def _header_received(self) -> None:
        # the reader hands over whatever 8 bytes came first; anything else is refused
        self.write(self.conn.start_frame(server_properties(), mechanisms=self._mechanisms()))

    def _mechanisms(self) -> bytes:
        # EXTERNAL on every TLS connection, as RabbitMQ's rabbitmq_auth_mechanism_ssl
        # offers it: without a verified certificate the login is refused (403), which
        # tells the client more than a mechanism it cannot negotiate
        return b"PLAIN AMQPLAIN EXTERNAL" if self.tls else b"PLAIN AMQPLAIN"

    def _channel_method(self, ch: int, method: m.Method) -> None:
        index = method.INDEX
        if index not in _CHANNEL_LIFECYCLE:  # acks and the rest: test the common case first
            self.channels[ch].handle(method)
        elif index == m.ChannelOpen.INDEX:
            # the context's client is set: connection.open precedes every channel.open
            try:
                opened = AMQPChannel(cast(ConnectionContext, self), ch)
            except BrokerError as exc:  # the user's max-channels limit: 530, as RabbitMQ
                raise to_amqp_error(exc, method) from None
            self.channels[ch] = opened
            self.write(encode_method_frame(ch, m.ChannelOpenOk()))
        elif index == m.ChannelClose.INDEX:
            channel = self.channels.pop(ch, None)
            if channel is not None:
                channel.close()
            self.write(encode_method_frame(ch, m.ChannelCloseOk()))
        # channel.close-ok: the channel was released when we sent channel.close

    def _connection_method(self, method: m.Method) -> None:
        index = method.INDEX
        if index == m.ConnectionStartOk.INDEX:
            self._start_ok(method)  # type: ignore[arg-type]
        elif index == m.ConnectionTuneOk.INDEX:
            self.conn.apply_tune_ok(method)  # type: ignore[arg-type]
            self.frame_max = self.conn.frame_max
            self.reader.frame_max = self.conn.frame_max
        elif index == m.ConnectionOpen.INDEX:
            self._open(method)  # type: ignore[arg-type]
        elif index == m.ConnectionClose.INDEX:
            self.close_reason = (
                f"client closed the connection ({method.reply_code} {method.reply_text!r})"  # type: ignore[attr-defined]
            )
            self._release()
            self.write(encode_method_frame(0, m.ConnectionCloseOk()))
            self._linger()
        elif index == m.ConnectionCloseOk.INDEX:
            self._finish()
        elif index == m.ConnectionUpdateSecret.INDEX:
            self.write(encode_method_frame(0, m.ConnectionUpdateSecretOk()))

    def _start_ok(self, method: m.ConnectionStartOk) -> None:
        props = method.client_properties or {}
        self._client_properties = props
        caps = props.get("capabilities") or {}
        self.cancel_notify = bool(caps.get("consumer_cancel_notify"))
        self._auth_failure_close = bool(caps.get("authentication_failure_close"))
        self._blocked_notify = bool(caps.get("connection.blocked"))
        username = "?"
        host = self.peer.rsplit(":", 1)[0]
        self.auth_mechanism = method.mechanism
        try:
            if method.mechanism == "EXTERNAL" and self.tls:
                if self.cert_user is None:
                    raise AccessRefused("EXTERNAL needs a verified client certificate")
                username = self.cert_user  # the response (an authzid) is ignored, as RabbitMQ does
                self._user = self.broker.authenticate_external(username, peer_host=host)
            else:
                username, password = parse_credentials(method.mechanism, bytes(method.response))
                self._user = self.broker.authenticate(
                    username, password, peer_host=host, protocol="AMQP", peer=self.peer
                )
        except AccessRefused as exc:
            if method.mechanism == "EXTERNAL":  # password logins are logged by the broker
                log.warning("%s: EXTERNAL login failed for %r: %s", self.peer, username, exc.text)
            self.close_reason = f"authentication failed for user '{username}'"
            if self._auth_failure_close:
                self._send_close(
                    m.ACCESS_REFUSED,
                    reply_text(
                        m.ACCESS_REFUSED,
                        f"Login was refused using authentication mechanism {method.mechanism}. "
                        "For details see the broker logfile.",
                    ),
                )
            else:
                self._finish()
            return
        self.write(self.conn.tune_frame())

    def _open(self, method: m.ConnectionOpen) -> None:
        try:
            self.client = self.broker.connect(
                self._user,
                method.virtual_host,
                protocol="AMQP 0-9-1",
                peer=self.peer,
                closer=self.shutdown,
                properties=self._client_properties,
                traffic=self.traffic,
            )
        except BrokerError as exc:
            log.warning("%s: connection.open refused: %s", self.peer, exc.text)
            self.close_reason = exc.text
            self._send_close(m.NOT_ALLOWED, reply_text(m.NOT_ALLOWED, exc.text), 10, 40)
            return
        self.client.ssl = self.tls
        self.client.auth_mechanism = self.auth_mechanism
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.write(encode_method_frame(0, m.ConnectionOpenOk()))
        self._start_heartbeats()
        self.gate.client = self.client
        self.gate.watch_alarms(self.broker.alarms)

    # -- errors and closing ----------------------------------------------------------------

    def _channel_error(self, ch: int, exc: ChannelError) -> None:
        log.warning("%s: channel %d error: %s", self.peer, ch, exc.reply_text)
        channel = self.channels.pop(ch, None)
        if channel is not None:
            channel.close()
        self.write(
            self.conn.channel_close_frame(
                ch, exc.reply_code, exc.reply_text, exc.class_id, exc.method_id
            )
        )

    def channel_failed(self, channel: AMQPChannel, error: ChannelError) -> None:
        if not self._closing and self.channels.get(channel.id) is channel:
            self._channel_error(channel.id, error)

    def _protocol_error(self, exc: AMQPError, *, fatal: bool) -> None:
        log.warning("%s: connection error: %s", self.peer, exc.reply_text)
        self.close_reason = exc.reply_text
        self._send_close(exc.reply_code, exc.reply_text, exc.class_id, exc.method_id)
        if fatal:  # the byte stream is unreadable: do not wait for close-ok
            self._finish()

    def _send_close(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        if self.conn.state in (State.CLOSING, State.CLOSED):
            return
        self._release()  # whatever held us, close-ok must be read (the gate reads on)
        self.write(self.conn.close_frame(code, text, class_id, method_id))
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(CLOSE_TIMEOUT, self._abort, "no close-ok")

    def _finish(self) -> None:
        """Flush what is queued and close the socket."""
        self._closing = True
        self._flush()
        if self._transport is not None:
            self._transport.close()

    def _linger(self) -> None:
        """After close-ok to a client's connection.close: read and drop what still comes
        until the client closes the socket, as RabbitMQ does (for up to the heartbeat
        interval or CLOSE_TIMEOUT). Closing with unread input makes the kernel send a
        reset: amqplib, whose publishes can follow its connection.close on the wire,
        then fails its writes with EPIPE and never sees the close complete."""
        self._closing = True  # data_received drops everything from now on
        self.gate.resume_all()  # unread bytes in the kernel: a reset
        self._flush()
        if self._timer is not None:
            self._timer.cancel()
        beat = self.conn.heartbeat
        wait = beat if 0 < beat < CLOSE_TIMEOUT else CLOSE_TIMEOUT
        self._timer = self._loop.call_later(wait, self._finish)

    def _abort(self, reason: str) -> None:
        self.close_reason = self.close_reason or reason
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def _release(self) -> None:
        """Give back everything the connection holds: unacked messages, exclusive queues."""
        channels, self.channels = self.channels, {}
        for channel in channels.values():
            channel.close()
        self._confirm_channels.clear()
        self.gate.release()
        if self.client is not None and self.broker.is_connected(self.client):
            self.broker.disconnect(self.client, self.close_reason)

    def shutdown(self, reason: str = "shutdown") -> None:
        """Close from the broker side (server shutdown, management API)."""
        self.close_reason = f"closed by the broker: {reason}"
        if self.conn.state is State.OPEN:
            self._send_close(
                m.CONNECTION_FORCED,
                reply_text(
                    m.CONNECTION_FORCED, f"broker forced connection closure with reason '{reason}'"
                ),
            )
            self._flush()
        elif self.conn.state is not State.CLOSING:
            self._finish()

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.conn.state is not State.OPEN:
            log.warning("%s: handshake timeout", self.peer)
            self._abort("handshake timeout")

    # -- heartbeats ------------------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        interval = self.conn.heartbeat
        if interval > 0:
            self._timer = self._loop.call_later(interval / 2, self._tick)

    def _tick(self) -> None:
        if self._closing:
            return
        if self._heard or self.gate.paused:  # a paused socket's heartbeats wait unread
            self._heard = False
            self._missed = 0
        else:
            self._missed += 1
            if self._missed >= 4:  # two whole intervals of silence
                log.warning(
                    "%s: missed heartbeats from client, timeout: %ds",
                    self.peer,
                    self.conn.heartbeat,
                )
                self._release()
                self._abort("missed heartbeats")
                return
        if not self._wrote:
            self.write(encode_heartbeat())
        self._wrote = False
        self._timer = self._loop.call_later(self.conn.heartbeat / 2, self._tick)
