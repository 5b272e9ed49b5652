"""Hypothesis-generated abusive connections against a live server, AMQP and STOMP, while a
well-behaved pika client publishes with confirms and consumes throughout.

Each example is one raw connection: (usually) a good handshake, then frames drawn from
everything the codec knows (every method of the spec with generated arguments, on any
channel, in any order: methods in the wrong state, content headers and bodies without a
publish, frames on channels never opened), raw bytes, truncated frames and a valid stream
with bits flipped. Then the abuser closes its side. For every example:

- what the server sent is a well-formed frame stream, and every connection.close or
  channel.close in it carries a reply code of the spec, with the text that names it;
- the server closes the socket within a deadline once the abuser has closed its side
  (or before: its own close, a bad header);
- the server log never shows an internal error or a traceback;

and at the end the bystander has not failed, waited more than a few seconds for any
round trip, or lost a message it had confirmed. The same for STOMP: commands and headers
drawn at random before and after CONNECT, unknown ack ids, junk after the NUL; and for
MQTT (3.1, 3.1.1, 5.0): packets drawn from the codec with bad topics, filters and ids,
garbage, truncation and bit flips after (usually) a good CONNECT.
the stream protocol: every client frame, unknown keys, flipped bits, truncation.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    FrameReader,
    MethodFrame,
    encode_method_frame,
)
from roost.amqp.errors import FrameError
from roost.mqtt import packets as mqtt_pk
from roost.mqtt.codec import PacketReader as MQTTReader
from roost.mqtt.codec import encode as mqtt_encode
from roost.mqtt.errors import MQTTError
from roost.stomp.frames import NEED_DATA as STOMP_NEED_DATA
from roost.stomp.frames import FrameParser
from roost.stream_protocol import constants as stream_constants
from roost.stream_protocol import frames as sf
from roost.stream_protocol.codec import FrameReader as StreamFrameReader
from roost.stream_protocol.codec import encode as stream_encode
from tests.codec.strategies import method_kwargs
from tests.security.abusers import GoodClient
from tests.stream_protocol.samples import FROM_CLIENT as STREAM_FROM_CLIENT
from tests.support import RoostProcess, running

DEADLINE = 5.0  # seconds the server may take to close after the abuser closed its side
MAX_MESSAGE = 4096
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    yield from running(
        RoostProcess(
            tmp_path_factory.mktemp("fuzz"),
            "--handshake-timeout", "2",
            "--max-message-size", str(MAX_MESSAGE),
            "--stomp-max-frame-size", "65536",
        )
    )


@pytest.fixture(scope="module")
def bystander(server: RoostProcess) -> Iterator[GoodClient]:
    client = GoodClient(server.url, "fuzz-bystander")
    client.start()
    assert client.ready.wait(10) and client.error is None, client.error
    yield client
    client.stop()
    assert not client.is_alive()
    client.check()
    assert len(client.stamps) >= 10
    assert client.longest_gap() < 5.0, client.longest_gap()


def clean_log(server: RoostProcess) -> None:
    log = server.log
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


def exchange(port: int, data: bytes) -> tuple[bytes, bool]:
    """Send ``data`` (the server may hang up meanwhile), close our side, and read to the
    end: (what the server sent, whether it closed within DEADLINE)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    received = bytearray()
    try:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server closed first (a fatal frame error, a bad header)
        deadline = time.monotonic() + DEADLINE
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return bytes(received), False
            except OSError:
                return bytes(received), True  # reset: closed as well
            if not chunk:
                return bytes(received), True
            received += chunk
    finally:
        sock.close()


# -- AMQP --------------------------------------------------------------------------------------


def handshake() -> bytes:
    """A good client's side up to connection.open (sent without waiting for replies)."""
    return b"".join(
        (
            PROTOCOL_HEADER,
            encode_method_frame(0, m.ConnectionStartOk(
                client_properties={"product": "fuzz", "capabilities": {
                    "authentication_failure_close": True}},
                mechanism="PLAIN", response=b"\x00guest\x00guest", locale="en_US")),
            encode_method_frame(0, m.ConnectionTuneOk(channel_max=16, frame_max=131072,
                                                      heartbeat=0)),
            encode_method_frame(0, m.ConnectionOpen(virtual_host="/")),
        )
    )


def frame(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


COMMON = [m.ChannelOpen, m.ChannelClose, m.BasicPublish, m.BasicAck, m.BasicGet,
          m.BasicConsume, m.QueueDeclare, m.ConfirmSelect, m.TxSelect, m.TxCommit,
          m.ConnectionClose, m.ConnectionStartOk, m.ConnectionOpen]
ANY_METHOD = st.sampled_from(sorted(m.METHODS.values(), key=lambda c: c.INDEX))
CHANNEL = st.integers(0, 4)


@st.composite
def method_frames(draw: st.DrawFn) -> bytes:
    cls: type[m.Method] = draw(st.one_of(st.sampled_from(COMMON), ANY_METHOD))
    kwargs: dict[str, Any] = draw(method_kwargs(cls))
    if cls is m.BasicPublish:
        kwargs["exchange"] = draw(st.sampled_from(["", "amq.direct", "fuzz-none"]))
    try:
        return encode_method_frame(draw(CHANNEL), cls(**kwargs))
    except (FrameError, ValueError, OverflowError, struct.error):
        return frame(1, draw(CHANNEL), struct.pack(">HH", cls.CLASS_ID, cls.METHOD_ID))


def header_frames(channel: int, size: int, properties: bytes) -> bytes:
    return frame(2, channel, struct.pack(">HHQ", 60, 0, size) + properties)


AMQP_PIECES = st.one_of(
    method_frames(),
    method_frames(),
    st.builds(header_frames, CHANNEL, st.one_of(st.integers(0, 64), st.integers(0, 1 << 63)),
              st.sampled_from([b"\x00\x00", b"\x80\x00", b"\xff\xff\x01", b""])),
    st.builds(lambda ch, body: frame(3, ch, body), CHANNEL, st.binary(max_size=64)),
    st.just(frame(8, 0, b"")),  # heartbeat
    st.builds(lambda ch: frame(8, ch, b""), st.integers(1, 3)),  # heartbeat off channel 0
    st.binary(min_size=1, max_size=24),  # garbage
    st.builds(lambda kind, ch, n: struct.pack(">BHI", kind, ch, n), st.integers(0, 255),
              CHANNEL, st.integers(0, (1 << 32) - 1)),  # a frame header alone
)


@st.composite
def amqp_scripts(draw: st.DrawFn) -> bytes:
    prefix = handshake() if draw(st.integers(0, 9)) else b""
    if prefix and draw(st.booleans()):  # open channels 1 and 2: channel-level errors too
        prefix += encode_method_frame(1, m.ChannelOpen()) + encode_method_frame(2, m.ChannelOpen())
    pieces: list[bytes] = draw(st.lists(AMQP_PIECES, min_size=1, max_size=12))
    body = b"".join(pieces)
    how = draw(st.sampled_from(["as is", "truncated", "bit flips"]))
    if how == "truncated" and body:
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif how == "bit flips" and body:
        flipped = bytearray(body)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(flipped) - 1))
            flipped[i] ^= 1 << draw(st.integers(0, 7))
        body = bytes(flipped)
    return prefix + body


def check_amqp_reply(reply: bytes) -> None:
    """The server's bytes: its protocol header (after a bad header) or frames, each
    close carrying a spec reply code and the text that names it."""
    if reply.startswith(b"AMQP"):
        assert reply == PROTOCOL_HEADER, reply
        event("bad protocol header")
        return
    reader = FrameReader(frame_max=1 << 20, expect_protocol_header=False)
    reader.feed(reply)
    while (got := reader.next_frame()) is not NEED_DATA:
        if isinstance(got, MethodFrame) and isinstance(got.method,
                                                       m.ConnectionClose | m.ChannelClose):
            code, text = got.method.reply_code, got.method.reply_text
            assert code in m.REPLY_NAMES, (code, text)
            assert text.startswith(m.REPLY_NAMES[code]), (code, text)
            event(f"{got.method.NAME} {code}")  # --hypothesis-show-statistics shows them


@FUZZ
@given(script=amqp_scripts())
def test_amqp_abusers(server: RoostProcess, bystander: GoodClient, script: bytes) -> None:
    reply, closed = exchange(server.amqp_port, script)
    assert closed, f"the server kept the socket open after our EOF; it sent {reply!r}"
    check_amqp_reply(reply)
    clean_log(server)


# -- STOMP -------------------------------------------------------------------------------------

STOMP_COMMANDS = ["CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK",
                  "BEGIN", "COMMIT", "ABORT", "DISCONNECT", "CONNECTED", "MESSAGE", "BOGUS"]
HEADER_NAMES = ["destination", "id", "ack", "receipt", "transaction", "content-length",
                "content-type", "heart-beat", "accept-version", "login", "passcode", "host",
                "message-id", "subscription", "prefetch-count", "x-queue-name", "durable",
                "x-max-length", "persistent", "ack-timeout", "reply-to"]
HEADER_VALUES = st.one_of(
    st.sampled_from(["/queue/fuzz", "/topic/fuzz.#", "/exchange/amq.direct/k", "/amq/queue/x",
                     "/temp-queue/t", "/bogus/x", "", "1", "client", "client-individual",
                     "auto", "0,0", "10,10", "-1", "99999999999", "1.2", "guest", "tx1"]),
    st.text(alphabet=st.characters(exclude_characters="\n\r:\x00",
                                   exclude_categories=["Cs"]), max_size=12),
)


@st.composite
def stomp_frames(draw: st.DrawFn) -> bytes:
    command = draw(st.sampled_from(STOMP_COMMANDS))
    headers = draw(st.lists(st.tuples(st.sampled_from(HEADER_NAMES), HEADER_VALUES),
                            max_size=5))
    body = draw(st.binary(max_size=32).filter(lambda b: b"\x00" not in b))
    head = "".join(f"{k}:{v}\n" for k, v in headers)
    return f"{command}\n{head}\n".encode() + body + b"\x00" + draw(
        st.sampled_from([b"", b"\n", b"\r\n", b"junk after the NUL"]))


STOMP_CONNECT = b"CONNECT\naccept-version:1.0,1.1,1.2\nlogin:guest\npasscode:guest\n\n\x00"


@st.composite
def stomp_scripts(draw: st.DrawFn) -> bytes:
    prefix = STOMP_CONNECT if draw(st.integers(0, 4)) else b""
    pieces = draw(st.lists(st.one_of(stomp_frames(), stomp_frames(),
                                     st.binary(min_size=1, max_size=24)),
                           min_size=1, max_size=10))
    body = b"".join(pieces)
    if draw(st.booleans()) and body:
        body = body[: draw(st.integers(0, len(body) - 1))]  # truncated
    return prefix + body


def check_stomp_reply(reply: bytes) -> None:
    """Well-formed server frames; each ERROR says why (a message header)."""
    parser = FrameParser(version="1.2")
    parser.feed(reply)
    while (got := parser.next_frame()) is not STOMP_NEED_DATA:
        assert got.command in ("CONNECTED", "MESSAGE", "RECEIPT", "ERROR"), got
        if got.command == "ERROR":
            assert got.get("message"), got
            event(f"ERROR {got.get('message')}")


@FUZZ
@given(script=stomp_scripts())
def test_stomp_abusers(server: RoostProcess, bystander: GoodClient, script: bytes) -> None:
    reply, closed = exchange(server.stomp_port, script)
    assert closed, f"the server kept the socket open after our EOF; it sent {reply!r}"
    check_stomp_reply(reply)
    clean_log(server)


# -- MQTT --------------------------------------------------------------------------------------

MQTT_TOPICS = st.one_of(
    st.sampled_from(["fuzz/a", "fuzz/+/b", "fuzz/#", "#", "+", "a//b", "$SYS/x", "$share/g/t",
                     "fuzz/#/x", "a+b", ""]),
    st.text(max_size=8),
)
MQTT_IDS = st.integers(0, 65535)


def _mqtt_packet(level: int) -> st.SearchStrategy[bytes]:
    def enc(packet: Any) -> bytes:
        try:
            return mqtt_encode(packet, level)
        except (ValueError, OverflowError, UnicodeEncodeError, MQTTError):
            return b"\xe0\x00"  # a DISCONNECT
    qos = st.integers(0, 2)
    publish = st.builds(
        lambda t, body, q, pid, retain: mqtt_pk.Publish(
            t, body, q, retain, packet_id=(pid or 1) if q else None),
        MQTT_TOPICS, st.binary(max_size=32), qos, MQTT_IDS, st.booleans())
    subscribe = st.builds(
        lambda pid, filters: mqtt_pk.Subscribe(pid or 1, [mqtt_pk.Subscription(f, q)
                                                          for f, q in filters]),
        MQTT_IDS, st.lists(st.tuples(MQTT_TOPICS, qos), min_size=1, max_size=3))
    unsubscribe = st.builds(lambda pid, fs: mqtt_pk.Unsubscribe(pid or 1, fs), MQTT_IDS,
                            st.lists(MQTT_TOPICS, min_size=1, max_size=3))
    acks = st.builds(lambda cls, pid: cls(pid or 1),
                     st.sampled_from([mqtt_pk.PubAck, mqtt_pk.PubRec, mqtt_pk.PubRel,
                                      mqtt_pk.PubComp]), MQTT_IDS)
    simple = st.sampled_from([mqtt_pk.PingReq(), mqtt_pk.Disconnect(),
                              mqtt_pk.Connect("again", level)])
    return st.one_of(publish, publish, subscribe, unsubscribe, acks, simple).map(enc)


@st.composite
def mqtt_scripts(draw: st.DrawFn) -> tuple[int, bytes]:
    level = draw(st.sampled_from([3, 4, 5]))
    prefix = b""
    if draw(st.integers(0, 9)):
        client_id = draw(st.sampled_from(["fuzz", "", "fuzz-2"]))
        prefix = mqtt_encode(mqtt_pk.Connect(client_id, level, keep_alive=30,
                                             username="guest", password=b"guest"), level)
    pieces = draw(st.lists(st.one_of(_mqtt_packet(level), _mqtt_packet(level),
                                     st.binary(min_size=1, max_size=24)),
                           min_size=1, max_size=10))
    body = b"".join(pieces)
    how = draw(st.sampled_from(["as is", "truncated", "bit flips"]))
    if how == "truncated" and body:
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif how == "bit flips" and body:
        flipped = bytearray(body)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(flipped) - 1))
            flipped[i] ^= 1 << draw(st.integers(0, 7))
        body = bytes(flipped)
    return level, prefix + body


SERVER_PACKETS = (mqtt_pk.ConnAck, mqtt_pk.Publish, mqtt_pk.PubAck, mqtt_pk.PubRec,
                  mqtt_pk.PubComp, mqtt_pk.SubAck, mqtt_pk.UnsubAck, mqtt_pk.PingResp,
                  mqtt_pk.Disconnect)


def check_mqtt_reply(level: int, reply: bytes) -> None:
    """Well-formed server packets at the client's level; a DISCONNECT comes last."""
    packets: list[Any] = []
    # a server that could not read the CONNECT (bit flips in its level) answers at its
    # own idea of the level: the reply must read cleanly at one of them
    attempts = list(dict.fromkeys((level, 4, 5, 3)))
    for attempt in attempts:
        reader = MQTTReader(role="client", protocol_level=attempt)
        reader.feed(reply)
        try:
            packets = reader.packets()
        except MQTTError:
            if attempt == attempts[-1]:
                raise
            continue
        break
    for packet in packets:
        assert isinstance(packet, SERVER_PACKETS), packet
        event(type(packet).__name__)
    if packets and isinstance(packets[-1], mqtt_pk.Disconnect):
        event(f"DISCONNECT 0x{packets[-1].reason_code:02X}")
    assert not any(isinstance(p, mqtt_pk.Disconnect) for p in packets[:-1]), packets


@FUZZ
@given(script=mqtt_scripts())
def test_mqtt_abusers(server: RoostProcess, bystander: GoodClient,
                      script: tuple[int, bytes]) -> None:
    level, data = script
    reply, closed = exchange(server.mqtt_port, data)
    assert closed, f"the server kept the socket open after our EOF; it sent {reply!r}"
    check_mqtt_reply(level, reply)


# -- the stream protocol ------------------------------------------------------------------------

STREAM_HANDSHAKE = b"".join(
    stream_encode(f)
    for f in (
        sf.PeerProperties(1, {"product": "fuzz"}),
        sf.SaslHandshake(2),
        sf.SaslAuthenticate(3, "PLAIN", b"\x00guest\x00guest"),
        sf.Tune(1_048_576, 0, response=True),
        sf.Open(4, "/"),
    )
)


@st.composite
def stream_scripts(draw: st.DrawFn) -> bytes:
    """Every frame a client may send (the codec's samples, on the fuzz stream names),
    in any order, before or after the handshake; unknown keys, flipped bits, junk."""
    prefix = STREAM_HANDSHAKE if draw(st.integers(0, 4)) else b""
    frames = st.sampled_from([stream_encode(f) for f in STREAM_FROM_CLIENT])
    unknown = st.builds(
        lambda key, body: struct.pack(">IHH", 4 + len(body), key, 1) + body,
        st.integers(0, 0xFFFF), st.binary(max_size=16),
    )
    pieces = draw(st.lists(st.one_of(frames, frames, unknown, st.binary(min_size=1, max_size=24)),
                           min_size=1, max_size=10))
    body = bytearray(b"".join(pieces))
    if draw(st.booleans()) and body:
        i = draw(st.integers(0, len(body) - 1))
        body[i] ^= 1 << draw(st.integers(0, 7))
    if draw(st.booleans()) and body:
        body = body[: draw(st.integers(0, len(body) - 1))]  # truncated
    return prefix + bytes(body)


def check_stream_reply(reply: bytes) -> None:
    """Well-formed server frames; each Close carries a response code of the protocol."""
    reader = StreamFrameReader(role="client")
    reader.feed(reply)
    for got in reader.frames():
        if isinstance(got, sf.Close):
            assert got.code in stream_constants.RESPONSE_NAMES, got
            event(f"Close {stream_constants.response_name(got.code)}")


@FUZZ
@given(script=stream_scripts())
def test_stream_protocol_abusers(
    server: RoostProcess, bystander: GoodClient, script: bytes
) -> None:
    reply, closed = exchange(server.stream_port, script)
    assert closed, f"the server kept the socket open after our EOF; it sent {reply!r}"
    check_stream_reply(reply)
    clean_log(server)


def test_the_broker_is_whole_after_the_fuzzing(server: RoostProcess,
                                               bystander: GoodClient) -> None:
    """Runs last in the module: the offenders left no connection behind."""
    import httpx

    with httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest")) as api:
        deadline = time.monotonic() + 10
        while len(api.get("/connections").json()) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        left = api.get("/connections").json()
        assert len(left) == 1, [  # the bystander only
            (c.get("protocol"), c.get("state"), c.get("peer_port"), c.get("client_properties"))
            for c in left
        ]
    clean_log(server)
