"""Sans-IO AMQP 0-9-1 client connection: handshake, tune, channels, content assembly.

``ClientConnection.receive(frame)`` applies one frame and returns an event for the
transport (or None: a heartbeat, or content still arriving). Requests (``start``,
``send``, ``open_channel``, ``close``…) queue bytes that the transport takes with
``data_to_send()``. Connection-level transitions are the rows of ``TRANSITIONS``; a
method the state does not allow is a ``ProtocolError`` with RabbitMQ's reply code, which
the transport sends in a connection.close before it hangs up. No sockets, no asyncio,
no clock: the transports (``aio``, ``sync``) own those and pass the time in.
"""

from __future__ import annotations

import enum
import platform
from typing import Any

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client.errors import ChannelClosed, ConnectionClosed, ConnectionLost, ProtocolError
from roost.client.uri import Endpoint

FRAME_MAX = 131072  # what we ask for unless the URI says (RabbitMQ's default too)
CHANNEL_MAX = 2047  # likewise
MAX_CHANNEL_NUMBER = 65535


class State(enum.Enum):
    AWAIT_START = "awaiting connection.start"
    AWAIT_TUNE = "awaiting connection.tune"
    AWAIT_OPEN_OK = "awaiting connection.open-ok"
    OPEN = "open"
    CLOSING = "closing"  # we sent connection.close; waiting for close-ok
    CLOSED = "closed"


_S = State
# (state, method INDEX) -> next state; anything else on channel 0 is a protocol error
TRANSITIONS: dict[tuple[State, int], State] = {
    (_S.AWAIT_START, m.ConnectionStart.INDEX): _S.AWAIT_TUNE,
    (_S.AWAIT_TUNE, m.ConnectionTune.INDEX): _S.AWAIT_OPEN_OK,
    (_S.AWAIT_OPEN_OK, m.ConnectionOpenOk.INDEX): _S.OPEN,
    **{(s, m.ConnectionClose.INDEX): _S.CLOSED for s in State if s is not _S.CLOSED},
    **{(s, m.ConnectionBlocked.INDEX): s for s in (_S.AWAIT_OPEN_OK, _S.OPEN, _S.CLOSING)},
    **{(s, m.ConnectionUnblocked.INDEX): s for s in (_S.AWAIT_OPEN_OK, _S.OPEN, _S.CLOSING)},
    (_S.CLOSING, m.ConnectionCloseOk.INDEX): _S.CLOSED,
}


# -- events -------------------------------------------------------------------------------


class Opened:
    """The handshake is done: channels may be opened."""

    __slots__ = ()


class MethodReceived:
    """A method without content on an open channel (replies, acks, nacks, cancels…)."""

    __slots__ = ("channel", "method")

    def __init__(self, channel: int, method: Any) -> None:
        self.channel = channel
        self.method = method


class ContentReceived:
    """A whole basic.deliver, basic.get-ok or basic.return: properties stay raw bytes."""

    __slots__ = ("body", "channel", "method", "properties")

    def __init__(self, channel: int, method: Any, properties: bytes, body: bytes) -> None:
        self.channel = channel
        self.method = method
        self.properties = properties
        self.body = body


class ChannelEnded:
    """A channel is gone: ``error`` is the broker's close, None when we closed it."""

    __slots__ = ("channel", "error")

    def __init__(self, channel: int, error: ChannelClosed | None) -> None:
        self.channel = channel
        self.error = error


class ConnectionEnded:
    """The connection is closed: ``error`` is the broker's close, None when we closed it."""

    __slots__ = ("error",)

    def __init__(self, error: ConnectionClosed | None) -> None:
        self.error = error


class BlockedChanged:
    """connection.blocked (``reason``) or connection.unblocked (``reason`` None)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str | None) -> None:
        self.reason = reason


Event = Opened | MethodReceived | ContentReceived | ChannelEnded | ConnectionEnded | BlockedChanged
_OPENED = Opened()


class _Channel:
    """A channel's state: opening/open/closing, and the content being assembled."""

    __slots__ = ("body_size", "chunks", "closing", "method", "properties", "received")

    def __init__(self) -> None:
        self.closing = False
        self.method: Any = None  # deliver / get-ok / return waiting for its content
        self.properties = b""
        self.body_size = -1  # -1: no header yet
        self.chunks: list[bytes] = []
        self.received = 0


class ClientConnection:
    """One client connection's protocol state. ``endpoint`` says who to log in as;
    ``heartbeat`` is asked for when the URI does not say (0: none)."""

    def __init__(
        self, endpoint: Endpoint, *, name: str = "", product: str = "roost", heartbeat: int = 0
    ) -> None:
        self.endpoint = endpoint
        self.state = State.AWAIT_START
        # None: the URI did not say; 0 there means "no limit" (AMQP's tune rule)
        self.frame_max = FRAME_MAX if endpoint.frame_max is None else endpoint.frame_max
        self.channel_max = CHANNEL_MAX if endpoint.channel_max is None else endpoint.channel_max
        self.reader = codec.FrameReader(frame_max=self.frame_max, expect_protocol_header=False)
        self.heartbeat = endpoint.heartbeat if endpoint.heartbeat is not None else heartbeat
        self.server_properties: dict[str, Any] = {}
        self.mechanism = ""
        self.blocked: str | None = None
        self.channels: dict[int, _Channel] = {}
        self._out: list[bytes] = []
        self._properties: dict[str, Any] = {
            "product": product,
            "platform": f"Python {platform.python_version()}",
            "capabilities": {
                "publisher_confirms": True,
                "exchange_exchange_bindings": True,
                "basic.nack": True,
                "consumer_cancel_notify": True,
                "connection.blocked": True,
                "authentication_failure_close": True,
                "per_consumer_qos": True,
            },
            **({"connection_name": name} if name else {}),
        }

    @property
    def server(self) -> str:
        """The broker's product and version, as it announced them (``RabbitMQ 3.10.8``)."""
        props = self.server_properties
        return " ".join(_text(props[k]) for k in ("product", "version") if props.get(k))

    # -- bytes out ---------------------------------------------------------------------

    def start(self) -> None:
        self._out.append(codec.PROTOCOL_HEADER)

    def send(self, channel: int, method: Any) -> None:
        self._out.append(codec.encode_method_frame(channel, method))

    def send_raw(self, data: bytes) -> None:
        self._out.append(data)

    @property
    def has_data(self) -> bool:
        return bool(self._out)

    def data_to_send(self) -> bytes:
        out, self._out = self._out, []
        return b"".join(out)

    def open_channel(self) -> int:
        """Queue channel.open on the lowest free number; the reply is channel.open-ok."""
        if self.state is not State.OPEN:
            raise ConnectionLost(f"the connection is {self.state.value}")
        limit = self.channel_max or MAX_CHANNEL_NUMBER
        number = next((n for n in range(1, limit + 1) if n not in self.channels), 0)
        if not number:
            raise ProtocolError(504, f"all {limit} channels are in use")
        self.channels[number] = _Channel()
        self.send(number, m.ChannelOpen())
        return number

    def close_channel(self, channel: int, reply_code: int = 200, text: str = "") -> None:
        state = self.channels.get(channel)
        if state is not None and not state.closing:
            state.closing = True
            self.send(channel, m.ChannelClose(reply_code=reply_code, reply_text=text,
                                              class_id=0, method_id=0))

    def close(self, reply_code: int = 200, text: str = "bye") -> None:
        if self.state in (State.CLOSING, State.CLOSED):
            return
        self.state = State.CLOSING
        self.send(0, m.ConnectionClose(reply_code=reply_code, reply_text=text, class_id=0,
                                       method_id=0))

    def tick(self, now: float, last_received: float) -> None:
        """Every ``heartbeat / 2`` s while heartbeats are on: queue one, and raise
        ``ConnectionLost`` once the broker was silent for two intervals (RabbitMQ's rule)."""
        if now - last_received > 2 * self.heartbeat:
            raise ConnectionLost(f"no heartbeat from the broker in {2 * self.heartbeat} s")
        self._out.append(codec.encode_heartbeat())

    # -- frames in ---------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes; every event they complete, in order."""
        self.reader.feed(data)
        events = []
        for frame in self.reader.frames():
            event = self.receive(frame)
            if event is not None:
                events.append(event)
        return events

    def receive(self, frame: Any) -> Event | None:
        kind = type(frame)
        if kind is codec.HeartbeatFrame:
            return None
        channel = frame.channel
        if channel == 0:
            if kind is not codec.MethodFrame:
                raise ProtocolError(505, "content frame on channel 0")
            return self._connection_method(frame.method)
        state = self.channels.get(channel)
        if state is None:
            raise ProtocolError(504, f"frame on channel {channel}, which is not open")
        if kind is codec.MethodFrame:
            return self._channel_method(channel, state, frame.method)
        if state.closing:
            return None  # content for a channel we are closing: dropped (spec)
        if kind is codec.HeaderFrame:
            if state.method is None or state.body_size >= 0:
                raise ProtocolError(505, f"unexpected content header on channel {channel}")
            state.properties, state.body_size = frame.properties, frame.body_size
        elif state.body_size < 0:
            raise ProtocolError(505, f"unexpected content body on channel {channel}")
        else:
            state.chunks.append(frame.payload)
            state.received += len(frame.payload)
        if state.received < state.body_size:
            return None
        if state.received > state.body_size:
            raise ProtocolError(505, f"content longer than announced on channel {channel}")
        chunks = state.chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        event = ContentReceived(channel, state.method, state.properties, body)
        state.method, state.body_size, state.chunks, state.received = None, -1, [], 0
        return event

    def _channel_method(self, channel: int, state: _Channel, method: Any) -> Event | None:
        if state.method is not None:
            raise ProtocolError(505, f"{method.NAME} while content was expected on {channel}")
        kind = type(method)
        if kind is m.ChannelClose:
            del self.channels[channel]
            self.send(channel, m.ChannelCloseOk())
            return ChannelEnded(channel, ChannelClosed(
                method.reply_code, method.reply_text, method.class_id, method.method_id))
        if kind is m.ChannelCloseOk:
            del self.channels[channel]
            return ChannelEnded(channel, None)
        if state.closing:
            return None  # anything but the close handshake is dropped while closing
        if method.CONTENT:  # deliver, get-ok, return: header and body follow
            state.method = method
            return None
        if kind is m.ChannelFlow:  # RabbitMQ no longer sends it; the spec says answer
            self.send(channel, m.ChannelFlowOk(active=method.active))
        return MethodReceived(channel, method)

    def _connection_method(self, method: Any) -> Event | None:
        nxt = TRANSITIONS.get((self.state, method.INDEX))
        if nxt is None:
            raise ProtocolError(503, f"{method.NAME} while {self.state.value}")
        self.state = nxt
        kind = type(method)
        if kind is m.ConnectionStart:
            self._start_ok(method)
        elif kind is m.ConnectionTune:
            self._tune_ok(method)
        elif kind is m.ConnectionOpenOk:
            return _OPENED
        elif kind is m.ConnectionClose:
            self.send(0, m.ConnectionCloseOk())
            return ConnectionEnded(ConnectionClosed(
                method.reply_code, method.reply_text, method.class_id, method.method_id))
        elif kind is m.ConnectionCloseOk:
            return ConnectionEnded(None)
        elif kind is m.ConnectionBlocked:
            self.blocked = method.reason or "blocked"
            return BlockedChanged(self.blocked)
        elif kind is m.ConnectionUnblocked:
            self.blocked = None
            return BlockedChanged(None)
        return None

    def _start_ok(self, start: Any) -> None:
        self.server_properties = start.server_properties or {}
        offered = _raw(start.mechanisms).decode(errors="replace").split()
        ep = self.endpoint
        self.mechanism = next((name for name in ep.mechanisms if name in offered), "")
        if not self.mechanism:
            raise ProtocolError(
                403, f"the broker offers {' '.join(offered) or 'no'} login, "
                f"not {' or '.join(ep.mechanisms)}"
            )
        if self.mechanism == "PLAIN":
            response = f"\0{ep.user}\0{ep.password}".encode()
        elif self.mechanism == "AMQPLAIN":  # a field table without its length prefix
            response = codec.encode_table({"LOGIN": ep.user, "PASSWORD": ep.password})[4:]
        else:  # EXTERNAL: the TLS client certificate says who we are
            response = b""
        self.send(0, m.ConnectionStartOk(client_properties=self._properties,
                                         mechanism=self.mechanism, response=response,
                                         locale="en_US"))

    def _tune_ok(self, tune: Any) -> None:
        self.channel_max = _negotiate(self.channel_max, tune.channel_max)
        self.frame_max = _negotiate(self.frame_max, tune.frame_max)
        self.reader.frame_max = self.frame_max
        # Our 0 turns heartbeats off (as pika); otherwise the smaller non-zero value.
        if self.heartbeat and tune.heartbeat:
            self.heartbeat = min(self.heartbeat, tune.heartbeat)
        self.send(0, m.ConnectionTuneOk(channel_max=self.channel_max, frame_max=self.frame_max,
                                        heartbeat=self.heartbeat))
        self.send(0, m.ConnectionOpen(virtual_host=self.endpoint.vhost))


def _negotiate(ours: int, theirs: int) -> int:
    """The smaller limit, where 0 means none (AMQP's tune rule)."""
    return min(ours, theirs) if ours and theirs else ours or theirs


def _raw(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
