"""A Hypothesis state machine over the sans-IO AMQP connection (amqp/connection.py).

Frames of every kind arrive in any order, on any channel, in any state: every method of
the spec with generated arguments, content headers and bodies of any size, heartbeats,
good and bad protocol headers. The machine plays the adapter's part (a ConnectionError
is answered with connection.close, a ChannelError with channel.close, a tune-ok is
applied) and checks after every step that the connection only ever raises its typed
errors and keeps its own bookkeeping within the negotiated limits.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    PROTOCOL_HEADER,
    BodyFrame,
    HeaderFrame,
    HeartbeatFrame,
    MethodFrame,
    ProtocolHeader,
)
from roost.amqp.connection import (
    BadHeader,
    ChannelMethod,
    ConnectionMethod,
    ContentReceived,
    ServerConnection,
    State,
)
from roost.amqp.errors import ChannelError, ConnectionError
from tests.codec.strategies import method_kwargs

CHANNEL_MAX = 3
MAX_MESSAGE = 1000
# 0, the low ones, and numbers past channel_max (RabbitMQ counts channels, not numbers)
CHANNELS = st.one_of(st.integers(0, CHANNEL_MAX + 2), st.sampled_from([2047, 65535]))

# the handshake and channel life cycle often, everything in the spec now and then
COMMON = [m.ConnectionStartOk, m.ConnectionTuneOk, m.ConnectionOpen, m.ChannelOpen,
          m.ChannelClose, m.ChannelCloseOk, m.BasicPublish, m.BasicAck, m.ConnectionClose]
ANY_METHOD = st.sampled_from(sorted(m.METHODS.values(), key=lambda c: c.INDEX))


@st.composite
def methods(draw: st.DrawFn) -> m.Method:
    cls: type[m.Method] = draw(st.one_of(st.sampled_from(COMMON), ANY_METHOD))
    kwargs: dict[str, Any] = draw(method_kwargs(cls))
    if cls is m.ConnectionTuneOk:  # mostly acceptable values, sometimes not
        kwargs["channel_max"] = draw(st.integers(0, CHANNEL_MAX + 1))
        kwargs["frame_max"] = draw(st.sampled_from([0, 4096, 131072, 100, 1 << 20]))
    return cls(**kwargs)


class ConnectionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.conn = self.new_connection()
        self.contents = 0  # complete messages handed to the adapter

    @staticmethod
    def new_connection() -> ServerConnection:
        return ServerConnection(
            channel_max=CHANNEL_MAX, frame_max=131072, heartbeat=0,
            max_message_size=MAX_MESSAGE,
        )

    @precondition(lambda self: self.conn.state in (State.CLOSING, State.CLOSED))
    @rule()
    def reconnect(self) -> None:
        """The adapter hung up (a bad header, a close handshake done or timed out): a new
        client."""
        self.conn = self.new_connection()

    @precondition(lambda self: self.conn.state is State.OPEN)
    @rule(channel=st.integers(1, CHANNEL_MAX + 1))
    def open_channel(self, channel: int) -> None:
        self.feed(MethodFrame(channel, m.ChannelOpen()))

    @precondition(lambda self: self.conn.state is State.OPEN)
    @rule(channel=st.integers(1, CHANNEL_MAX), size=st.integers(0, MAX_MESSAGE + 5),
          parts=st.integers(1, 4), short=st.booleans())
    def publish(self, channel: int, size: int, parts: int, short: bool) -> None:
        """basic.publish, its header and the body in ``parts`` frames; ``short`` leaves
        the last frame out (the next frame then arrives in the middle of the content)."""
        if channel not in self.conn.channels:
            self.feed(MethodFrame(channel, m.ChannelOpen()))
        self.feed(MethodFrame(channel, m.BasicPublish(exchange="", routing_key="q")))
        self.feed(HeaderFrame(channel, 60, size, b"\x00\x00"))
        body = b"b" * size
        step = max(1, -(-size // parts))
        frames = [body[i:i + step] for i in range(0, size, step)]
        for payload in frames[:-1] if short else frames:
            self.feed(BodyFrame(channel, payload))

    def feed(self, frame: object) -> None:
        """What ``AMQPServerProtocol.data_received`` does with one frame."""
        try:
            event = self.conn.receive(frame)
            if isinstance(event, ConnectionMethod) and isinstance(
                event.method, m.ConnectionTuneOk
            ):
                self.conn.apply_tune_ok(event.method)
            if isinstance(event, ContentReceived):
                assert len(event.body) <= MAX_MESSAGE
                assert event.channel in self.conn.channels or event.channel > 0
                self.contents += 1
            assert event is None or isinstance(
                event, ConnectionMethod | ChannelMethod | ContentReceived | BadHeader
            ) or type(event).__name__ in ("HeaderReceived", "HeartbeatReceived")
        except ChannelError as exc:
            assert exc.reply_code in (m.PRECONDITION_FAILED, m.CHANNEL_ERROR), exc
            assert exc.reply_text.startswith(m.REPLY_NAMES[exc.reply_code] + " - "), exc
            self.conn.channel_close_frame(getattr(frame, "channel", 0), exc.reply_code,
                                          exc.reply_text)
        except ConnectionError as exc:
            assert exc.reply_code in (m.COMMAND_INVALID, m.UNEXPECTED_FRAME, m.CHANNEL_ERROR,
                                      m.NOT_ALLOWED), exc
            assert exc.reply_text.startswith(m.REPLY_NAMES[exc.reply_code] + " - "), exc
            self.conn.close_frame(exc.reply_code, exc.reply_text)

    @precondition(lambda self: self.conn.state is not State.CLOSED)
    @rule(good=st.booleans(), raw=st.binary(min_size=8, max_size=8))
    def protocol_header(self, good: bool, raw: bytes) -> None:
        self.feed(ProtocolHeader(PROTOCOL_HEADER if good else raw))

    @precondition(lambda self: self.conn.state is not State.CLOSED)
    @rule(channel=CHANNELS, method=methods())
    def method(self, channel: int, method: m.Method) -> None:
        self.feed(MethodFrame(channel, method))

    @precondition(lambda self: self.conn.state is not State.CLOSED)
    @rule(channel=CHANNELS, size=st.one_of(st.integers(0, 40), st.integers(0, 1 << 62)),
          properties=st.binary(max_size=8))
    def header(self, channel: int, size: int, properties: bytes) -> None:
        self.feed(HeaderFrame(channel, 60, size, properties))

    @precondition(lambda self: self.conn.state is not State.CLOSED)
    @rule(channel=CHANNELS, payload=st.binary(min_size=1, max_size=50))
    def body(self, channel: int, payload: bytes) -> None:
        self.feed(BodyFrame(channel, payload))

    @precondition(lambda self: self.conn.state is not State.CLOSED)
    @rule()
    def heartbeat(self) -> None:
        self.feed(HeartbeatFrame(0))

    @precondition(lambda self: self.conn.state is State.AWAIT_HEADER)
    @rule()
    def handshake(self) -> None:
        """A well-behaved client's way to OPEN, so that channels get exercised."""
        for frame in (
            ProtocolHeader(PROTOCOL_HEADER),
            MethodFrame(0, m.ConnectionStartOk(client_properties={}, mechanism="PLAIN",
                                               response=b"\0u\0p", locale="en_US")),
            MethodFrame(0, m.ConnectionTuneOk(channel_max=CHANNEL_MAX, frame_max=131072,
                                              heartbeat=0)),
            MethodFrame(0, m.ConnectionOpen(virtual_host="/")),
        ):
            self.feed(frame)
        assert self.conn.state is State.OPEN

    @invariant()
    def bookkeeping_within_limits(self) -> None:
        conn = self.conn
        assert isinstance(conn.state, State)
        assert 1 <= conn.channel_max <= CHANNEL_MAX
        assert len(conn.channels) <= conn.channel_max
        assert all(1 <= ch <= 65535 for ch in conn.channels)
        if conn.state in (State.AWAIT_HEADER, State.AWAIT_START_OK, State.AWAIT_TUNE_OK):
            assert not conn.channels
        for chan in conn.channels.values():
            assert chan.received <= MAX_MESSAGE
            if chan.body_size >= 0:
                assert chan.method is not None
                assert chan.received < chan.body_size <= MAX_MESSAGE
            else:
                assert chan.received == 0 and not chan.parts


TestConnectionStateMachine = ConnectionMachine.TestCase
TestConnectionStateMachine.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
