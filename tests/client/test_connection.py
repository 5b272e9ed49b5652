"""The client's sans-IO protocol state, without sockets: a scripted broker's frames in,
the client's frames and events out."""

from __future__ import annotations

from typing import Any

import pytest

from roost.amqp import codec
from roost.amqp import codec_methods as m
from roost.client import ChannelClosed, ConnectionClosed, ConnectionLost, ProtocolError
from roost.client.connection import (
    BlockedChanged,
    ChannelEnded,
    ClientConnection,
    ConnectionEnded,
    ContentReceived,
    MethodReceived,
    Opened,
    State,
)
from roost.client.uri import parse_uri

START = m.ConnectionStart(version_major=0, version_minor=9, server_properties={
    "product": "RabbitMQ", "version": "3.10.8"}, mechanisms=b"PLAIN AMQPLAIN", locales=b"en_US")


def sent(conn: ClientConnection) -> list[Any]:
    """What the client queued, as frames (methods for method frames)."""
    data = conn.data_to_send()
    reader = codec.FrameReader(expect_protocol_header=data.startswith(b"AMQP"))
    reader.feed(data)
    return [f.method if isinstance(f, codec.MethodFrame) else f for f in reader.frames()]


def frame(channel: int, method: Any) -> bytes:
    return codec.encode_method_frame(channel, method)


def opened(uri: str = "amqp://u:p@h/v", *, tune: tuple[int, int, int] = (2047, 131072, 60),
           heartbeat: int = 0) -> ClientConnection:
    conn = ClientConnection(parse_uri(uri), heartbeat=heartbeat)
    conn.start()
    conn.receive_data(frame(0, START))
    conn.receive_data(frame(0, m.ConnectionTune(channel_max=tune[0], frame_max=tune[1],
                                                heartbeat=tune[2])))
    (event,) = conn.receive_data(frame(0, m.ConnectionOpenOk()))
    assert isinstance(event, Opened)
    conn.data_to_send()
    return conn


def test_handshake() -> None:
    conn = ClientConnection(parse_uri("amqp://bob:pw@h/prod"), name="shovel-1", product="p")
    conn.start()
    assert conn.data_to_send() == codec.PROTOCOL_HEADER
    assert conn.receive_data(frame(0, START)) == []
    (start_ok,) = sent(conn)
    assert isinstance(start_ok, m.ConnectionStartOk)
    assert (start_ok.mechanism, start_ok.response) == ("PLAIN", b"\0bob\0pw")
    props = start_ok.client_properties
    assert props["product"] == "p" and props["connection_name"] == "shovel-1"
    assert props["capabilities"]["connection.blocked"] is True
    assert props["capabilities"]["authentication_failure_close"] is True
    assert conn.server == "RabbitMQ 3.10.8"
    conn.receive_data(frame(0, m.ConnectionTune(channel_max=0, frame_max=131072,
                                                heartbeat=60)))
    tune_ok, open_ = sent(conn)
    assert tune_ok == m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=0)
    assert open_ == m.ConnectionOpen(virtual_host="prod")
    assert conn.state is State.AWAIT_OPEN_OK
    assert isinstance(conn.receive_data(frame(0, m.ConnectionOpenOk()))[0], Opened)
    assert conn.state is State.OPEN


@pytest.mark.parametrize(
    ("query", "heartbeat", "tune", "expected"),
    [
        ("", 0, (2047, 131072, 60), (2047, 131072, 0)),  # ours: no heartbeat
        ("", 30, (2047, 131072, 60), (2047, 131072, 30)),  # the smaller
        ("heartbeat=90", 0, (0, 0, 60), (2047, 131072, 60)),  # the URI's, then smaller
        ("heartbeat=5", 0, (0, 0, 0), (2047, 131072, 5)),  # theirs 0: ours
        ("frame_max=0&channel_max=0", 0, (100, 65536, 0), (100, 65536, 0)),  # 0: theirs
        ("frame_max=8192&channel_max=10", 0, (2047, 131072, 0), (10, 8192, 0)),
    ],
)
def test_tune_negotiation(query: str, heartbeat: int, tune: tuple[int, int, int],
                          expected: tuple[int, int, int]) -> None:
    conn = opened(f"amqp://h?{query}", tune=tune, heartbeat=heartbeat)
    assert (conn.channel_max, conn.frame_max, conn.heartbeat) == expected
    assert conn.reader.frame_max == expected[1]


def test_login_mechanisms() -> None:
    conn = ClientConnection(parse_uri("amqp://bob:pw@h?auth_mechanism=amqplain"))
    conn.receive_data(frame(0, START))
    (start_ok,) = sent(conn)
    assert start_ok.mechanism == "AMQPLAIN"
    assert codec.decode_table(len(start_ok.response).to_bytes(4, "big") + start_ok.response,
                              0)[0] == {"LOGIN": "bob", "PASSWORD": "pw"}
    only_external = m.ConnectionStart(server_properties={}, mechanisms=b"EXTERNAL",
                                      locales=b"en_US")
    with pytest.raises(ProtocolError, match="offers EXTERNAL login, not PLAIN or AMQPLAIN"):
        ClientConnection(parse_uri("amqp://h")).receive_data(frame(0, only_external))


def test_content_arrives_whole_from_any_split() -> None:
    conn = opened()
    ch = conn.open_channel()
    conn.receive_data(frame(ch, m.ChannelOpenOk()))
    props = codec.encode_properties(m.BasicProperties(message_id="m1"))
    body = bytes(range(256)) * 3
    data = codec.encode_basic_deliver(ch, "ctag", 7, True, "x", "k", props, body, 300)
    data += codec.encode_basic_get_ok(ch, 8, False, "", "q", 3, props, b"", 131072)
    events = []
    for i in range(len(data)):  # a byte at a time
        events += conn.receive_data(data[i : i + 1])
    deliver, get_ok = events
    assert isinstance(deliver, ContentReceived) and isinstance(get_ok, ContentReceived)
    assert (deliver.method.delivery_tag, deliver.body, deliver.properties) == (7, body, props)
    assert (get_ok.method.message_count, get_ok.body) == (3, b"")


@pytest.mark.parametrize(
    ("frames", "code"),
    [
        (lambda ch: codec.encode_content(ch, 60, b"\0\0", b"x", 131072), 505),  # no method
        (lambda ch: codec.encode_content(ch, 60, b"\0\0", b"x", 131072)[22:], 505),  # a body
        (lambda ch: frame(ch, m.BasicDeliver(consumer_tag="t", delivery_tag=1, exchange="",
                                             routing_key="q")) + frame(ch, m.BasicQosOk()),
         505),  # a method while content was expected
        (lambda ch: frame(9, m.BasicQosOk()), 504),  # a channel we never opened
        (lambda ch: frame(0, m.ConnectionTune(channel_max=0, frame_max=0, heartbeat=0)), 503),
    ],
)
def test_what_the_protocol_forbids_is_a_protocol_error(frames: Any, code: int) -> None:
    conn = opened()
    ch = conn.open_channel()
    conn.receive_data(frame(ch, m.ChannelOpenOk()))
    with pytest.raises(ProtocolError) as err:
        conn.receive_data(frames(ch))
    assert err.value.reply_code == code


def test_broker_closes_are_answered_and_carry_their_reply() -> None:
    conn = opened()
    ch = conn.open_channel()
    conn.receive_data(frame(ch, m.ChannelOpenOk()))
    conn.data_to_send()
    (ended,) = conn.receive_data(frame(ch, m.ChannelClose(
        reply_code=404, reply_text="NOT_FOUND - no queue 'q'", class_id=50, method_id=10)))
    assert isinstance(ended, ChannelEnded) and isinstance(ended.error, ChannelClosed)
    assert (ended.error.reply_code, ended.error.class_id, ended.error.method_id) == (404, 50, 10)
    assert sent(conn) == [m.ChannelCloseOk()]
    assert conn.open_channel() == ch  # the number is free again
    (gone,) = conn.receive_data(frame(0, m.ConnectionClose(
        reply_code=320, reply_text="CONNECTION_FORCED - shutdown", class_id=0, method_id=0)))
    assert isinstance(gone, ConnectionEnded) and isinstance(gone.error, ConnectionClosed)
    assert gone.error.reply_code == 320 and "320 CONNECTION_FORCED" in str(gone.error)
    assert sent(conn)[-1] == m.ConnectionCloseOk()
    assert conn.state is State.CLOSED


def test_our_closes() -> None:
    conn = opened()
    ch = conn.open_channel()
    conn.receive_data(frame(ch, m.ChannelOpenOk()))
    conn.close_channel(ch)
    late = codec.encode_basic_deliver(ch, "t", 1, False, "", "q", b"\0\0", b"late", 131072)
    assert conn.receive_data(late) == []  # dropped while the channel closes
    (ended,) = conn.receive_data(frame(ch, m.ChannelCloseOk()))
    assert isinstance(ended, ChannelEnded) and ended.error is None
    conn.close()
    assert conn.state is State.CLOSING
    assert isinstance(sent(conn)[-1], m.ConnectionClose)
    (done,) = conn.receive_data(frame(0, m.ConnectionCloseOk()))
    assert isinstance(done, ConnectionEnded) and done.error is None


def test_blocked_and_unblocked() -> None:
    conn = opened()
    (blocked,) = conn.receive_data(frame(0, m.ConnectionBlocked(reason="low on memory")))
    assert isinstance(blocked, BlockedChanged) and blocked.reason == conn.blocked == "low on memory"
    (unblocked,) = conn.receive_data(frame(0, m.ConnectionUnblocked()))
    assert isinstance(unblocked, BlockedChanged) and unblocked.reason is conn.blocked is None


def test_heartbeats() -> None:
    conn = opened(tune=(0, 0, 10), heartbeat=10)
    conn.tick(now=5.0, last_received=0.0)
    assert conn.data_to_send() == codec.encode_heartbeat()
    assert conn.receive_data(codec.encode_heartbeat()) == []  # the broker's: no event
    with pytest.raises(ConnectionLost, match="no heartbeat from the broker in 20 s"):
        conn.tick(now=20.5, last_received=0.0)


def test_channel_numbers() -> None:
    conn = opened(tune=(2, 131072, 0))
    assert [conn.open_channel(), conn.open_channel()] == [1, 2]
    with pytest.raises(ProtocolError, match="all 2 channels are in use"):
        conn.open_channel()
    events = conn.receive_data(frame(1, m.ChannelOpenOk()) + frame(2, m.QueueDeclareOk(
        queue="q", message_count=0, consumer_count=0)))
    assert [type(e) for e in events] == [MethodReceived, MethodReceived]
    assert [e.channel for e in events] == [1, 2]  # type: ignore[union-attr]
