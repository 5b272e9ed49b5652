"""One AMQP 0-9-1 connection: the handshake, its channels, errors, closing and
heartbeats. Frames go through the sans-IO ``ServerConnection``; methods go to
``AMQPChannel``. The socket is ``amqp/protocol.py``'s (``roost/plumbing.py``): what this
writes while handling a read goes out in one ``transport.write`` with the channels'
pending confirms; what it writes outside a read, once per loop iteration. Reading,
login, opening and release are the shared connection lifecycle (``roost/lifecycle.py``);
when the socket is read is the ``ReadGate``'s (``roost/backpressure.py``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    FrameReader,
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
from roost.amqp.handshake import (
    AMQPLimits,
    mechanisms,
    open_connection,
    server_properties,
    start_ok,
)
from roost.backpressure import Clock, ReadGate, Timer
from roost.core import AdapterPort, Traffic
from roost.core.errors import BrokerError
from roost.lifecycle import ReadLoop, Transport, release

if TYPE_CHECKING:
    from roost.core.ports.adapter import Client

log = logging.getLogger("roost.amqp")

CLOSE_TIMEOUT = 3.0  # seconds to wait for close-ok before dropping the socket
# connection.blocked's reason, as RabbitMQ words it, by the alarm in effect
BLOCKED_REASONS = (("memory", "low on memory"), ("disk", "low on disk"))

_CHANNEL_LIFECYCLE = frozenset(
    (m.ChannelOpen.INDEX, m.ChannelClose.INDEX, m.ChannelCloseOk.INDEX)
)


class AMQPSession(ReadLoop):
    def __init__(
        self,
        broker: AdapterPort,
        limits: AMQPLimits,
        transport: Transport,
        registry: set[Any],
        clock: Clock,
    ) -> None:
        self.broker = broker
        self.limits = limits
        self.transport = transport
        self.registry = registry
        self.write = transport.write  # channels write straight to the plumbing's batch
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
        self.peer = transport.peer
        self.tls = transport.tls  # the socket is a TLS one (AMQPS)
        self.cert_user = transport.cert_user  # CN of a verified client certificate (EXTERNAL)
        self.close_reason = ""
        self.traffic = Traffic()  # bytes in/out for the management API, from the first byte
        self.user: Any = None
        self.auth_mechanism = ""
        self.client_properties: dict[str, Any] = {}
        self.auth_failure_close = False
        self._clock = clock
        self.confirm_channels: set[AMQPChannel] = set()
        self.closed = False  # no more input will be processed
        self._timer: Timer | None = None
        self._heard = True
        self._sent = -1  # traffic.send_cnt at the last heartbeat tick
        self._missed = 0
        # when the socket is read: congested queues, resource alarms, a turn's worth of
        # work done (roost/backpressure.py, shared by every protocol)
        self.gate = ReadGate(self, clock)
        self.blocked_notify = False  # the client's connection.blocked capability
        registry.add(self)
        self._timer = clock.call_later(limits.handshake_timeout, self._handshake_timeout)
        log.debug("%s: accepted AMQP connection", self.peer)

    # -- input (the read path is lifecycle.ReadLoop's) ---------------------------------------

    def heard(self) -> None:
        self._heard = True

    def feed(self, data: bytes) -> None:
        self.reader.feed(data)

    def work(self) -> None:
        """Handle the frames read so far while the gate is open, a turn's worth at most;
        what is left waits in the reader (and the socket is not read) until it opens."""
        if self.closed:
            return
        reader = self.reader
        gate = self.gate
        frame: Any = None
        try:
            while gate.open and not self.closed:
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
            if gate.holding:
                gate.update_congestion()  # acks in this batch may have changed the answer
            self.transport.flush()

    def connection_lost(self) -> None:
        self.close_reason = self.close_reason or "client closed the socket"
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._release()
        self.gate.close()
        self.registry.discard(self)
        if self.client is None:  # an open connection's close is logged by the core's registry
            log.info("%s: connection closed before open: %s", self.peer, self.close_reason)

    def set_writable(self, writable: bool) -> None:
        for channel in list(self.channels.values()):
            channel.session.set_writable(writable)

    # -- input flow control (roost/backpressure.py) ---------------------------------------

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def owes_acks(self) -> bool:
        """Deliveries await acks on this socket: congestion must not pause it."""
        return any(ch.session.unacked_count for ch in self.channels.values())

    def alarm_blocked(self, alarms: frozenset[str]) -> None:
        if self.blocked_notify:
            reason = next(
                (text for name, text in BLOCKED_REASONS if name in alarms), "low on resources"
            )
            self.write(encode_method_frame(0, m.ConnectionBlocked(reason=reason)))
        log.info("%s: blocked by resource alarm(s): %s", self.peer, ", ".join(sorted(alarms)))

    def alarm_unblocked(self) -> None:
        if self.blocked_notify and self.conn.state is State.OPEN:
            self.write(encode_method_frame(0, m.ConnectionUnblocked()))

    # -- output ----------------------------------------------------------------------------

    def confirms_pending(self, channel: AMQPChannel) -> None:
        """The channel has confirms to send: they go out with the next flush (at the end
        of this read, or at the next loop turn after an fsync)."""
        # a channel already in the set has its flush due: one ask per flush, not per message
        if channel not in self.confirm_channels:
            self.confirm_channels.add(channel)
            self.transport.flush_soon()

    def send_confirms(self) -> None:
        """Called by the plumbing before it writes: the channels' confirms join the batch."""
        for channel in self.confirm_channels:
            channel.flush_confirms()
        self.confirm_channels.clear()

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
        elif cls is HeaderReceived:  # whatever 8 bytes came first; anything else is refused
            self.write(self.conn.start_frame(
                server_properties(self.broker.cluster_name()), mechanisms=mechanisms(self.tls)
            ))
        elif cls is BadHeader:
            log.warning("%s: bad protocol header %r", self.peer, event.raw)  # type: ignore[attr-defined]
            self.close_reason = "bad protocol header"
            self.write(PROTOCOL_HEADER)
            self.finish()

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
            start_ok(self, method)  # type: ignore[arg-type]
        elif index == m.ConnectionTuneOk.INDEX:
            self.conn.apply_tune_ok(method)  # type: ignore[arg-type]
            self.frame_max = self.conn.frame_max
            self.reader.frame_max = self.conn.frame_max
        elif index == m.ConnectionOpen.INDEX:
            open_connection(self, method)  # type: ignore[arg-type]
        elif index == m.ConnectionClose.INDEX:
            self.close_reason = (
                f"client closed the connection ({method.reply_code} {method.reply_text!r})"  # type: ignore[attr-defined]
            )
            self._release()
            self.write(encode_method_frame(0, m.ConnectionCloseOk()))
            self._linger()
        elif index == m.ConnectionCloseOk.INDEX:
            self.finish()
        elif index == m.ConnectionUpdateSecret.INDEX:
            self.write(encode_method_frame(0, m.ConnectionUpdateSecretOk()))

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
        if not self.closed and self.channels.get(channel.id) is channel:
            self._channel_error(channel.id, error)

    def _protocol_error(self, exc: AMQPError, *, fatal: bool) -> None:
        log.warning("%s: connection error: %s", self.peer, exc.reply_text)
        self.close_reason = exc.reply_text
        self.send_close(exc.reply_code, exc.reply_text, exc.class_id, exc.method_id)
        if fatal:  # the byte stream is unreadable: do not wait for close-ok
            self.finish()

    def send_close(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        if self.conn.state in (State.CLOSING, State.CLOSED):
            return
        self._release()  # whatever held us, close-ok must be read (the gate reads on)
        self.write(self.conn.close_frame(code, text, class_id, method_id))
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._clock.call_later(CLOSE_TIMEOUT, self._abort, "no close-ok")

    def finish(self) -> None:
        """Flush what is queued and close the socket."""
        self.closed = True
        self.transport.close()

    def _linger(self) -> None:
        """After close-ok to a client's connection.close: read and drop what still comes
        until the client closes the socket, as RabbitMQ does (for up to the heartbeat
        interval or CLOSE_TIMEOUT). Closing with unread input makes the kernel send a
        reset: amqplib, whose publishes can follow its connection.close on the wire,
        then fails its writes with EPIPE and never sees the close complete."""
        self.closed = True  # data_received drops everything from now on
        self.gate.resume_all()  # unread bytes in the kernel: a reset
        self.transport.flush()
        if self._timer is not None:
            self._timer.cancel()
        beat = self.conn.heartbeat
        wait = beat if 0 < beat < CLOSE_TIMEOUT else CLOSE_TIMEOUT
        self._timer = self._clock.call_later(wait, self.finish)

    def _abort(self, reason: str) -> None:
        self.close_reason = self.close_reason or reason
        self.closed = True
        self.transport.abort()

    def _release(self) -> None:
        """Give back everything the connection holds: its channels (unacked messages
        requeue), then its core connection (consumers, exclusive queues). It reads on:
        the client's close-ok is still to come."""
        channels, self.channels = self.channels, {}
        for channel in channels.values():
            channel.close()
        self.confirm_channels.clear()
        release(self.broker, self.client, self.close_reason, self.gate, reading_on=True)

    def shutdown(self, reason: str = "shutdown") -> None:
        """Close from the broker side (server shutdown, management API)."""
        self.close_reason = f"closed by the broker: {reason}"
        if self.conn.state is State.OPEN:
            self.send_close(
                m.CONNECTION_FORCED,
                reply_text(
                    m.CONNECTION_FORCED, f"broker forced connection closure with reason '{reason}'"
                ),
            )
            self.transport.flush()
        elif self.conn.state is not State.CLOSING:
            self.finish()

    def _handshake_timeout(self) -> None:
        self._timer = None
        if self.conn.state is not State.OPEN:
            log.warning("%s: handshake timeout", self.peer)
            self._abort("handshake timeout")

    # -- heartbeats ------------------------------------------------------------------------

    def start_heartbeats(self) -> None:
        """The connection is open: the handshake's deadline goes, heartbeats start."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        interval = self.conn.heartbeat
        if interval > 0:
            self._timer = self._clock.call_later(interval / 2, self._tick)

    def _tick(self) -> None:
        if self.closed:
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
        if self.traffic.send_cnt == self._sent:  # nothing written since the last tick
            self.write(encode_heartbeat())
        self._sent = self.traffic.send_cnt
        self._timer = self._clock.call_later(self.conn.heartbeat / 2, self._tick)
