"""Byte-level conformance: what no client library sends, answered as RabbitMQ answers."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import pika
import pytest

from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    BodyFrame,
    FrameReader,
    HeaderFrame,
    HeartbeatFrame,
    MethodFrame,
    encode_basic_publish,
    encode_method_frame,
)
from tests.integration.conftest import pika_params
from tests.support import RawAMQP, RoostProcess, sync_ops

_open_peers: list[Peer] = []


@pytest.fixture(autouse=True)
def _close_peers() -> Iterator[None]:
    yield
    while _open_peers:
        _open_peers.pop().raw.close()


class Peer:
    """A raw client that completes the handshake and reads frames (closed after the test)."""

    def __init__(self, port: int, *, heartbeat: int = 0, frame_max: int = 131072) -> None:
        self.raw = RawAMQP(port)
        _open_peers.append(self)
        self.reader = FrameReader(expect_protocol_header=False)
        self.raw.send(PROTOCOL_HEADER)
        start = self.expect(m.ConnectionStart)
        assert b"PLAIN" in start.mechanisms
        self.raw.send(
            encode_method_frame(
                0,
                m.ConnectionStartOk(
                    client_properties={"product": "raw"},
                    mechanism="PLAIN",
                    response=b"\x00guest\x00guest",
                    locale="en_US",
                ),
            )
        )
        self.tune = self.expect(m.ConnectionTune)
        self.raw.send(
            encode_method_frame(
                0, m.ConnectionTuneOk(channel_max=0, frame_max=frame_max, heartbeat=heartbeat)
            )
        )
        self.raw.send(encode_method_frame(0, m.ConnectionOpen(virtual_host="/")))
        self.expect(m.ConnectionOpenOk)

    def frame(self, timeout: float = 5.0):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while True:
            frame = self.reader.next_frame()
            if frame is not NEED_DATA:
                return frame
            data = self.raw.recv_some(timeout=max(0.01, deadline - time.monotonic()))
            if not data:
                raise EOFError("server closed the socket")
            self.reader.feed(data)

    def expect(self, cls: type):  # type: ignore[no-untyped-def]
        frame = self.frame()
        assert isinstance(frame, MethodFrame) and isinstance(frame.method, cls), frame
        return frame.method

    def open_channel(self, ch: int = 1) -> None:
        self.raw.send(encode_method_frame(ch, m.ChannelOpen()))
        self.expect(m.ChannelOpenOk)

    def expect_close(self) -> m.ConnectionClose:
        """Read until connection.close (skipping heartbeats) and return it."""
        while True:
            frame = self.frame()
            if isinstance(frame, MethodFrame) and isinstance(frame.method, m.ConnectionClose):
                return frame.method


def test_garbage_header_gets_our_header_and_a_close(roost: RoostProcess) -> None:
    with RawAMQP(roost.amqp_port) as raw:
        raw.send(b"GET / HTTP/1.1\r\n\r\n")
        assert raw.recv_until_closed() == PROTOCOL_HEADER


def test_old_protocol_version_is_refused(roost: RoostProcess) -> None:
    with RawAMQP(roost.amqp_port) as raw:
        raw.send(b"AMQP\x01\x01\x00\x09")
        assert raw.recv_until_closed() == PROTOCOL_HEADER


def test_frame_larger_than_frame_max_is_501(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port, frame_max=4096)
    peer.open_channel()
    peer.raw.send(encode_basic_publish(1, "", "q", False, False, b"\x00\x00", b"x" * 9000, 131072))
    close = peer.expect_close()
    assert close.reply_code == 501


def test_bad_frame_end_is_501(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port)
    frame = bytearray(encode_method_frame(0, m.ConnectionUpdateSecretOk()))
    frame[-1] = 0x00
    peer.raw.send(bytes(frame))
    assert peer.expect_close().reply_code == 501


def test_unknown_method_closes_the_connection(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port)
    peer.open_channel()
    payload = struct.pack(">HH", 60, 999)
    peer.raw.send(struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce")
    close = peer.expect_close()
    assert close.reply_code == m.COMMAND_INVALID  # RabbitMQ just drops the socket


def test_body_longer_than_declared_is_a_connection_error(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port)
    peer.open_channel()
    good = encode_basic_publish(1, "", "q", False, False, b"\x00\x00", b"abcd", 131072)
    # rewrite the header's body size from 4 to 2
    method_len = struct.unpack_from(">I", good, 3)[0] + 8
    header = bytearray(good[method_len:])
    struct.pack_into(">Q", header, 7 + 4, 2)
    peer.raw.send(good[:method_len] + bytes(header))
    assert peer.expect_close().reply_code == m.UNEXPECTED_FRAME


def test_content_header_without_publish_is_505(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port)
    peer.open_channel()
    good = encode_basic_publish(1, "", "q", False, False, b"\x00\x00", b"abcd", 131072)
    method_len = struct.unpack_from(">I", good, 3)[0] + 8
    peer.raw.send(good[method_len:])  # header + body with no basic.publish before them
    assert peer.expect_close().reply_code == m.UNEXPECTED_FRAME


def test_method_on_unopened_channel_is_504(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port)
    peer.raw.send(encode_method_frame(5, m.BasicQos(prefetch_count=1)))
    assert peer.expect_close().reply_code == m.CHANNEL_ERROR


def test_server_sends_heartbeats(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port, heartbeat=1)
    assert isinstance(peer.frame(timeout=3), HeartbeatFrame)


def test_silent_client_is_dropped_after_two_intervals(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port, heartbeat=1)
    started = time.monotonic()
    with pytest.raises((EOFError, ConnectionResetError)):
        while True:
            peer.frame(timeout=10)
    assert 1.5 < time.monotonic() - started < 6


def test_client_that_vanishes_mid_frame_frees_its_messages(roost: RoostProcess, qname: str) -> None:
    good = pika.BlockingConnection(pika_params(roost))
    ch = good.channel()
    ch.queue_declare(qname)
    ch.basic_publish("", qname, b"keep me")
    peer = Peer(roost.amqp_port)
    peer.open_channel()
    peer.raw.send(encode_method_frame(1, m.BasicGet(queue=qname)))
    assert peer.expect(m.BasicGetOk).delivery_tag == 1
    partial = encode_basic_publish(1, "", qname, False, False, b"\x00\x00", b"z" * 100, 131072)
    peer.raw.send(partial[: len(partial) - 30])  # cut inside the body frame
    peer.raw.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        method, _p, body = ch.basic_get(qname, auto_ack=True)
        if body is not None:
            break
        time.sleep(0.05)
    assert (body, method.redelivered) == (b"keep me", True)
    assert ch.basic_get(qname) == (None, None, None)  # the torn publish was not enqueued
    good.close()


def test_handshake_timeout_drops_a_silent_socket(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = RoostProcess(tmp_path, "--handshake-timeout", "0.5").start()
    try:
        with RawAMQP(server.amqp_port) as raw:
            started = time.monotonic()
            assert raw.recv_until_closed(limit=5) == b""
            assert time.monotonic() - started < 3
    finally:
        server.kill()


def test_channel_method_on_channel_zero_is_504(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port)
    peer.raw.send(encode_method_frame(0, m.BasicQos(prefetch_count=1)))
    assert peer.expect_close().reply_code == m.CHANNEL_ERROR


def test_connection_method_on_a_channel_is_503(roost: RoostProcess) -> None:
    peer = Peer(roost.amqp_port)
    peer.open_channel()
    peer.raw.send(encode_method_frame(1, m.ConnectionUpdateSecretOk()))
    assert peer.expect_close().reply_code == m.COMMAND_INVALID


def _failed_login(port: int, capabilities: dict[str, bool]) -> list[object]:
    """Handshake with a wrong password; every frame the server sends until it closes."""
    with RawAMQP(port) as raw:
        raw.send(PROTOCOL_HEADER)
        raw.send(
            encode_method_frame(
                0,
                m.ConnectionStartOk(
                    client_properties={"product": "raw", "capabilities": capabilities},
                    mechanism="PLAIN",
                    response=b"\x00guest\x00wrong",
                    locale="en_US",
                ),
            )
        )
        reader = FrameReader(expect_protocol_header=False)
        reader.feed(raw.recv_until_closed(limit=5.0))
        frames = []
        while (frame := reader.next_frame()) is not NEED_DATA:
            frames.append(frame.method if isinstance(frame, MethodFrame) else frame)
        return frames


def test_failed_login_without_authentication_failure_close_is_a_bare_close(
    roost: RoostProcess,
) -> None:
    """As the spec and RabbitMQ 3.10.8: a client that did not announce the capability gets
    the socket closed after connection.start, no connection.close (the login failure is
    logged); one that did gets 403."""
    frames = _failed_login(roost.amqp_port, {})
    assert [type(f) for f in frames] == [m.ConnectionStart]
    frames = _failed_login(roost.amqp_port, {"authentication_failure_close": True})
    assert [type(f) for f in frames] == [m.ConnectionStart, m.ConnectionClose]
    close = frames[1]
    assert isinstance(close, m.ConnectionClose)
    assert (close.reply_code, close.reply_text) == (
        403,
        "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details "
        "see the broker logfile.",
    )
    roost.wait_for_log("AMQP login failed for user 'guest' from 127.0.0.1:")


def test_frames_sent_after_a_reply_held_for_the_disk_wait_behind_it(
    slow_sync: RoostProcess, qname: str
) -> None:
    """A durable declare-ok waits for the fsync (amqp/held.py): a delivery and a reply
    the same channel produces meanwhile go out after it, in the order they were made,
    and once it is out the channel writes straight through again."""
    peer = Peer(slow_sync.amqp_port)
    peer.open_channel()
    plain, durable, after = qname + ".plain", qname + ".durable", qname + ".after"
    peer.raw.send(encode_method_frame(1, m.QueueDeclare(queue=plain, auto_delete=True)))
    peer.expect(m.QueueDeclareOk)
    peer.raw.send(encode_method_frame(1, m.BasicConsume(queue=plain, no_ack=True)))
    peer.expect(m.BasicConsumeOk)
    before = sync_ops(slow_sync)
    peer.raw.send(  # one write: the server reads all three in one go
        encode_method_frame(1, m.QueueDeclare(queue=durable, durable=True))
        + encode_basic_publish(1, "", plain, False, False, b"\x00\x00", b"held", 131072)
        + encode_method_frame(1, m.QueueDeclare(queue=after, auto_delete=True))
    )
    first = peer.expect(m.QueueDeclareOk)
    assert sync_ops(slow_sync) > before, "the durable declare-ok came before the fsync"
    assert first.queue == durable
    assert peer.expect(m.BasicDeliver).routing_key == plain
    assert isinstance(peer.frame(), HeaderFrame)
    body = peer.frame()
    assert isinstance(body, BodyFrame) and bytes(body.payload) == b"held"
    assert peer.expect(m.QueueDeclareOk).queue == after
    # nothing held now: a reply goes out at once (no fsync to wait for)
    peer.raw.send(encode_method_frame(1, m.QueueDeclare(queue=after, passive=True)))
    assert peer.expect(m.QueueDeclareOk).queue == after
