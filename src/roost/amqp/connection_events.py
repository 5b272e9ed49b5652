"""The AMQP connection's states, its state table, the events ``ServerConnection.receive``
returns, and a channel's frame-level state (moved out of amqp/connection.py to keep it small;
compiled with it, docs/compiled.md)."""

from __future__ import annotations

import enum

from roost.amqp import codec_methods as m


class State(enum.Enum):
    AWAIT_HEADER = "awaiting protocol header"
    AWAIT_START_OK = "awaiting connection.start-ok"
    AWAIT_TUNE_OK = "awaiting connection.tune-ok"
    AWAIT_OPEN = "awaiting connection.open"
    OPEN = "open"
    CLOSING = "closing"  # we sent connection.close; waiting for close-ok
    CLOSED = "closed"


HEADER = "protocol-header"
HEARTBEAT = "heartbeat"

# (state, what arrived) -> next state. What arrived is a method INDEX, HEADER or HEARTBEAT.
TRANSITIONS: dict[tuple[State, object], State] = {
    (State.AWAIT_HEADER, HEADER): State.AWAIT_START_OK,
    (State.AWAIT_START_OK, m.ConnectionStartOk.INDEX): State.AWAIT_TUNE_OK,
    (State.AWAIT_TUNE_OK, m.ConnectionTuneOk.INDEX): State.AWAIT_OPEN,
    (State.AWAIT_TUNE_OK, HEARTBEAT): State.AWAIT_TUNE_OK,
    (State.AWAIT_OPEN, m.ConnectionOpen.INDEX): State.OPEN,
    (State.AWAIT_OPEN, HEARTBEAT): State.AWAIT_OPEN,
    (State.OPEN, HEARTBEAT): State.OPEN,
    (State.OPEN, m.ConnectionClose.INDEX): State.CLOSED,
    (State.OPEN, m.ConnectionCloseOk.INDEX): State.CLOSED,
    (State.OPEN, m.ConnectionUpdateSecret.INDEX): State.OPEN,
    (State.CLOSING, m.ConnectionClose.INDEX): State.CLOSED,
    (State.CLOSING, m.ConnectionCloseOk.INDEX): State.CLOSED,
    (State.CLOSING, HEARTBEAT): State.CLOSING,
}


# -- events returned to the adapter -------------------------------------------------------


class HeaderReceived:
    """The 8-byte protocol header arrived and was right."""


class BadHeader:
    """The first 8 bytes were not AMQP 0-9-1's header: answer with ours and hang up."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


class ConnectionMethod:
    """A connection-class method in the handshake or after it (start-ok, tune-ok, open,
    close, close-ok, update-secret)."""

    __slots__ = ("method",)

    def __init__(self, method: m.Method) -> None:
        self.method = method


class ChannelMethod:
    """A method on an open channel that carries no content."""

    __slots__ = ("channel", "method")

    def __init__(self, channel: int, method: m.Method) -> None:
        self.channel = channel
        self.method = method


class ContentReceived:
    """A complete basic.publish: method, raw properties and the whole body."""

    __slots__ = ("body", "channel", "method", "properties")

    def __init__(self, channel: int, method: m.Method, properties: bytes, body: bytes) -> None:
        self.channel = channel
        self.method = method
        self.properties = properties
        self.body = body


class HeartbeatReceived:
    pass


Event = (
    HeaderReceived
    | BadHeader
    | ConnectionMethod
    | ChannelMethod
    | ContentReceived
    | HeartbeatReceived
)


class ChannelFrames:
    """Frame-level state of one channel: content assembly and the closing handshake."""

    __slots__ = ("body_size", "closing", "method", "parts", "properties", "received")

    def __init__(self) -> None:
        self.closing = False  # we sent channel.close; drop all but close/close-ok
        self.method: m.Method | None = None  # the content method being assembled
        self.properties = b""
        self.body_size = -1  # -1: waiting for the content header
        self.parts: list[bytes] = []
        self.received = 0

    def reset(self) -> None:
        self.method = None
        self.properties = b""
        self.body_size = -1
        if self.parts:
            self.parts = []
        self.received = 0
