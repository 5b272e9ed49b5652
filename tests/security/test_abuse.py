"""Bad input and abuse against a real server, each while a well-behaved pika client
publishes with confirms and consumes (tests/security/abusers.py: GoodClient). The
offenders get their protocol's error or are dropped; the good client is served
throughout and loses no confirmed message.

Byte-level answers to single bad frames are in tests/integration/test_amqp_wire.py and
tests/stomp/test_stomp_errors.py, limits one at a time in test_limits.py and alarms in
test_alarms.py; these tests add load, many offenders at once and the bystander.

Two Roost fixes came out of them: STOMP's CONNECT deadline now follows
--handshake-timeout (it was a fixed 10 s: test_stomp_slowloris_…), and the memory alarm
trims the heap before judging RSS (test_alarms.py::test_heap_is_trimmed_…)."""

from __future__ import annotations

import contextlib
import itertools
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from roost.amqp import codec_methods as m
from roost.amqp.codec import encode_method_frame
from tests.security.abusers import (
    Drainer,
    Flood,
    GoodClient,
    PublishStorm,
    RawPeer,
    Slowloris,
    huge_frame,
    params,
    try_connect,
)
from tests.support import RoostProcess, eventually, running

HANDSHAKE_TIMEOUT = 1.0
MAX_CONNECTIONS = 25
MAX_MESSAGE = 1024 * 1024
STOMP_CONNECT = b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    yield from running(
        RoostProcess(
            tmp_path_factory.mktemp("abuse"),
            "--handshake-timeout", str(HANDSHAKE_TIMEOUT),
            "--max-connections", str(MAX_CONNECTIONS),
            "--max-message-size", str(MAX_MESSAGE),
            "--alarm-check-interval", "0.05",
            "--stomp-max-frame-size", "65536",
        )
    )


@pytest.fixture
def good(server: RoostProcess, qname: str) -> Iterator[GoodClient]:
    """The bystander: running before the abuse starts, checked after it ends."""
    client = GoodClient(server.url, qname)
    client.start()
    assert client.ready.wait(10) and client.error is None, client.error
    eventually(lambda: len(client.stamps) >= 5)
    yield client
    client.stop()
    assert not client.is_alive()
    client.check()


def served_during(client: GoodClient, start: float, end: float, gap: float = 2.0) -> None:
    """The good client completed round trips all through [start, end]."""
    assert client.error is None, repr(client.error)
    done = client.count_between(start, end)
    assert done >= max(3, int((end - start) * 2)), (done, end - start)
    inside = [t for t in client.stamps if start <= t <= end]
    edges = [start, *inside, end]
    worst = max(b - a for a, b in itertools.pairwise(edges))
    assert worst < gap, f"the good client waited {worst:.2f} s for a round trip"


def http(server: RoostProcess) -> httpx.Client:
    return httpx.Client(base_url=server.http_url + "/api", auth=("guest", "guest"), timeout=10)


# -- slowloris --------------------------------------------------------------------------------


def test_slowloris_is_dropped_at_the_handshake_timeout(
    server: RoostProcess, good: GoodClient
) -> None:
    before = server.log.count("handshake timeout")
    loris = Slowloris(server.amqp_port, count=200, interval=0.1)
    started = time.monotonic()
    loris.start()
    assert loris.all_closed.wait(HANDSHAKE_TIMEOUT + 8), len(loris.lifetimes)
    ended = time.monotonic()
    assert loris.refused == 0 and len(loris.lifetimes) == 200
    # each was still dripping bytes (header, then start-ok) when the deadline dropped it
    assert loris.sent_bytes > 200 * 5
    assert min(loris.lifetimes) >= HANDSHAKE_TIMEOUT * 0.9
    assert max(loris.lifetimes) < HANDSHAKE_TIMEOUT + 3.0, max(loris.lifetimes)
    eventually(lambda: server.log.count("handshake timeout") - before >= 200)
    served_during(good, started, ended)


def http_served(server: RoostProcess, until: threading.Event) -> Callable[[], list[int]]:
    """A well-behaved management API client polling /api/overview (a fresh connection
    each time) until ``until`` is set; call the result for every status it got."""
    statuses: list[int] = []

    def poll() -> None:
        while not until.is_set():
            try:
                reply = httpx.get(server.http_url + "/api/overview", auth=("guest", "guest"),
                                  timeout=5)
                statuses.append(reply.status_code)
            except httpx.HTTPError as exc:
                statuses.append(-1)
                print("HTTP bystander:", repr(exc))
            until.wait(0.1)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()

    def result() -> list[int]:
        until.set()
        thread.join(10)
        return statuses

    return result


UNENDING_REQUESTS = {
    # headers that never end: the next byte is always one more of a header value
    "http": b"GET /api/overview HTTP/1.1\r\nHost: roost\r\nX-Slow: " + b"a" * 400,
    "ws": b"GET /ws HTTP/1.1\r\nHost: roost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Protocol: v12.stomp\r\nX-Slow: " + b"a" * 400,
}


@pytest.mark.parametrize("port_name", ["http", "ws"])
def test_http_and_websocket_slowloris_are_dropped_at_the_handshake_timeout(
    server: RoostProcess, good: GoodClient, port_name: str
) -> None:
    """Requests (an API call, a WebSocket upgrade) whose headers never end, a byte every
    0.1 s, and sockets that send nothing: closed --handshake-timeout after they connected
    (aiohttp's own deadline is an hour), while the AMQP client and a management API
    client are served."""
    port = server.http_port if port_name == "http" else server.ws_port
    done = threading.Event()
    bystander = http_served(server, done)
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
    loris = Slowloris(port, count=100, interval=0.1, script=UNENDING_REQUESTS[port_name])
    started = time.monotonic()
    loris.start()
    try:
        assert loris.all_closed.wait(HANDSHAKE_TIMEOUT + 8), len(loris.lifetimes)
        for s in silent:
            assert read_to_close(s, timeout=HANDSHAKE_TIMEOUT + 5) == b""
        ended = time.monotonic()
    finally:
        for s in silent:
            s.close()
    statuses = bystander()
    assert loris.refused == 0 and len(loris.lifetimes) == 100
    assert loris.sent_bytes > 100 * 5  # each was still sending when it was dropped
    assert min(loris.lifetimes) >= HANDSHAKE_TIMEOUT * 0.9
    assert max(loris.lifetimes) < HANDSHAKE_TIMEOUT + 3.0, max(loris.lifetimes)
    assert ended - started < HANDSHAKE_TIMEOUT + 5
    assert len(statuses) >= 5 and set(statuses) == {200}, statuses
    served_during(good, started, ended)


def test_http_body_sent_a_byte_at_a_time_gets_408(server: RoostProcess, good: GoodClient) -> None:
    """Complete headers, then a body that never finishes: 408 at --handshake-timeout."""
    started = time.monotonic()
    s = socket.create_connection(("127.0.0.1", server.http_port))
    try:
        s.sendall(b"PUT /api/queues/%2F/slow-body HTTP/1.1\r\nHost: roost\r\n"
                  b"Authorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        s.settimeout(0.1)
        reply = b""
        while b"\r\n\r\n" not in reply and time.monotonic() - started < HANDSHAKE_TIMEOUT + 5:
            with contextlib.suppress(OSError):
                s.sendall(b" ")
            with contextlib.suppress(TimeoutError):
                reply += s.recv(65536)
        assert reply.startswith(b"HTTP/1.1 408"), reply
        assert b"request body not received in time" in reply + read_to_close(s, timeout=1)
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT + 3
    finally:
        s.close()
    with http(server) as api:
        assert api.get("/queues/%2F/slow-body").status_code == 404  # nothing was declared
    served_during(good, started, time.monotonic())


# -- connection flood -------------------------------------------------------------------------


def test_connection_flood_beyond_max_connections(server: RoostProcess, good: GoodClient) -> None:
    with http(server) as api:  # only the good client's connection holds a slot
        eventually(lambda: len(api.get("/connections").json()) == 1)
    flood = Flood(server.url, count=60, workers=4)
    started = time.monotonic()
    flood.start()
    assert flood.done.wait(30)
    ended = time.monotonic()
    try:
        # the good client holds one slot; the flood gets the rest and a clean refusal after
        assert len(flood.opened) == MAX_CONNECTIONS - 1
        assert len(flood.refusals) == 60 - (MAX_CONNECTIONS - 1)
        assert set(flood.refusals) == {
            f"530 NOT_ALLOWED - connection refused: node connection limit ({MAX_CONNECTIONS}) "
            "is reached"
        }
        assert all(conn.channel().is_open for conn in flood.opened)  # admitted ones work
        served_during(good, started, ended)
    finally:
        flood.stop()
    with http(server) as api:  # refused and closed connections leave nothing behind
        eventually(lambda: len(api.get("/connections").json()) == 1)
    again = [try_connect(server.url) for _ in range(MAX_CONNECTIONS - 1)]
    try:
        assert all(isinstance(c, pika.BlockingConnection) for c in again), again
    finally:
        for conn in again:
            if isinstance(conn, pika.BlockingConnection):
                conn.close()


def test_flood_of_sockets_that_never_speak(server: RoostProcess, good: GoodClient) -> None:
    """Raw TCP connections count nowhere until connection.open; the handshake timeout
    reaps them and pika connections are admitted meanwhile."""
    socks = [socket.create_connection(("127.0.0.1", server.amqp_port)) for _ in range(150)]
    started = time.monotonic()
    try:
        conn = try_connect(server.url)
        assert isinstance(conn, pika.BlockingConnection), conn
        conn.close()
        for s in socks:
            s.settimeout(HANDSHAKE_TIMEOUT + 5)
            assert s.recv(10) == b""  # closed by the server
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT + 5
    finally:
        for s in socks:
            s.close()
    served_during(good, started, time.monotonic())


# -- huge frames ------------------------------------------------------------------------------


def test_frames_far_above_frame_max_get_501(server: RoostProcess, good: GoodClient) -> None:
    started = time.monotonic()
    codes = [huge_frame(server.amqp_port) for _ in range(30)]
    assert codes == [m.FRAME_ERROR] * 30  # as RabbitMQ: fatal frame_error, from the header
    served_during(good, started, time.monotonic())


def test_message_above_max_message_size_is_406_on_the_channel(
    server: RoostProcess, good: GoodClient, qname: str
) -> None:
    started = time.monotonic()
    qname += "-big"  # not the good client's queue
    with pika.BlockingConnection(params(server.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(qname)
        ch.basic_publish("", qname, b"x" * MAX_MESSAGE)  # exactly the limit is fine
        with pytest.raises(ChannelClosedByBroker) as err:
            ch.basic_publish("", qname, b"x" * (MAX_MESSAGE + 1))
            ch.basic_qos(prefetch_count=1)  # a round trip: the close has arrived
        assert err.value.reply_code == 406
        assert err.value.reply_text == (
            f"PRECONDITION_FAILED - message size {MAX_MESSAGE + 1} is larger than configured "
            f"max size {MAX_MESSAGE}"
        )
        ch = conn.channel()  # a channel error: the connection lives on
        assert ch.queue_declare(qname, passive=True).method.message_count == 1
        ch.queue_delete(qname)
    served_during(good, started, time.monotonic())


def test_content_header_claiming_an_absurd_body_size(
    server: RoostProcess, good: GoodClient
) -> None:
    """A header frame announcing 2**62 body bytes is refused at once (406, channel-level),
    without waiting for or buffering the body; the body frames that follow are dropped."""
    started = time.monotonic()
    peer = RawPeer(server.amqp_port)
    try:
        peer.open_channel()
        peer.send(encode_method_frame(1, m.BasicPublish(exchange="", routing_key="nowhere")))
        props = struct.pack(">HHQH", 60, 0, 1 << 62, 0)  # class, weight, body size, flags
        header = struct.pack(">BHI", 2, 1, len(props)) + props + b"\xce"
        body = struct.pack(">BHI", 3, 1, 1000) + b"b" * 1000 + b"\xce"
        peer.send(header + body * 5)
        close = peer.expect(m.ChannelClose)
        assert close.reply_code == 406 and "larger than configured max size" in close.reply_text
        peer.send(encode_method_frame(1, m.ChannelCloseOk()))
        peer.open_channel(2)  # the connection serves on
        peer.send(encode_method_frame(2, m.BasicQos(prefetch_count=1)))
        peer.expect(m.BasicQosOk)
    finally:
        peer.close()
    served_during(good, started, time.monotonic())


# -- publish storm past the memory watermark ---------------------------------------------------


def test_publish_storm_past_the_memory_watermark(server: RoostProcess, good: GoodClient,
                                                 qname: str) -> None:
    with http(server) as api:  # the good client's connection, nothing left by others
        eventually(lambda: len(api.get("/connections").json()) == 1)
    storm_queue = qname + "-storm"
    drainer = Drainer(server.url, storm_queue)
    drainer.start()
    assert drainer.ready.wait(10) and drainer.error is None
    storm = PublishStorm(server.url, storm_queue, publishers=3, size=64 * 1024).start()
    eventually(lambda: len(storm.confirmed) >= 100)
    with http(server) as api:
        node = api.get("/nodes").json()[0]["name"]

        def watermark(limit: str) -> None:
            reply = api.put(f"/nodes/{node}/vm-memory-high-watermark", json={"limit": limit})
            assert reply.status_code == 204, reply.text

        try:
            # a watermark the storm has already passed (far below the broker's RSS)
            watermark("1MiB")

            def states() -> list[str]:
                return sorted(c["state"] for c in api.get("/connections").json())

            # the storm's three connections are blocked, the drainer's only "blocking"; the good
            # client publishes too, so it is blocked as well
            eventually(lambda: states() == ["blocked"] * 4 + ["blocking"], what=states)
            # the drainer empties the queue while the alarm lasts, and has every message
            # confirmed so far (a confirm may still arrive for a publish taken just
            # before the block; nothing is taken after it)
            eventually(lambda: api.get(f"/queues/%2F/{storm_queue}").json()["messages"] == 0)
            eventually(drainer.drained(list(storm.confirmed)))
            assert states() == ["blocked"] * 4 + ["blocking"]
        finally:
            watermark("0.99")
        eventually(lambda: storm.events.count("unblocked") == 3, what=storm.events)
        assert storm.events.count("blocked: low on memory") == 3, storm.events
        after = len(storm.confirmed)
        eventually(lambda: len(storm.confirmed) > after + 50)  # publishing again
    storm.stop()
    assert not storm.errors, storm.errors
    eventually(drainer.drained(list(storm.confirmed)), timeout=30)
    drainer.stop()
    assert drainer.error is None, repr(drainer.error)
    # every confirmed message was consumed, at least once
    assert all(drainer.seen.get(body, 0) >= 1 for body in storm.confirmed)
    # the bystander publishes too: blocked during the alarm, served again after it
    resumed = time.monotonic()
    eventually(lambda: good.count_between(resumed, time.monotonic()) >= 5)


def test_a_storm_raises_the_memory_alarm_and_draining_clears_it(
    server: RoostProcess, good: GoodClient, qname: str
) -> None:
    """No operator this time: the storm itself pushes the broker's RSS past a watermark
    32 MiB above where it stands, and once a consumer has drained the queue the alarm
    clears by itself (the freed heap is given back: core/alarms.py trim_heap)."""
    storm_queue = qname + "-natural"
    with pika.BlockingConnection(params(server.url)) as conn:
        conn.channel().queue_declare(storm_queue)
    with http(server) as api:
        node = api.get("/nodes").json()[0]
        limit = node["mem_used"] + 32 * 1024 * 1024
        path = f"/nodes/{node['name']}/vm-memory-high-watermark"
        assert api.put(path, json={"limit": str(limit)}).status_code == 204

        def alarm() -> bool:
            return bool(api.get("/nodes").json()[0]["mem_alarm"])

        storm = PublishStorm(server.url, storm_queue, publishers=3, size=256 * 1024).start()
        drainer = Drainer(server.url, storm_queue)
        try:
            eventually(lambda: alarm() or bool(storm.errors), what=storm.errors)

            def states() -> list[str]:
                return sorted(c["state"] for c in api.get("/connections").json())

            # the storm's three connections and the good client's, each blocked at its
            # next publish
            eventually(lambda: states() == ["blocked"] * 4, what=states)
            storm.halt()  # blocked publishers stop once they are let through
            drainer.start()
            eventually(lambda: not alarm(), timeout=20,
                     what=lambda: api.get("/nodes").json()[0]["mem_used"] - limit)
            storm.stop()
            assert not storm.errors, storm.errors
            assert sorted(storm.events) == ["blocked: low on memory"] * 3 + ["unblocked"] * 3
            eventually(drainer.drained(list(storm.confirmed)), timeout=30)
            assert all(drainer.seen[body] >= 1 for body in storm.confirmed)
        finally:
            storm.stop()
            drainer.stop()
            api.put(path, json={"limit": "0.99"})
    assert drainer.error is None, repr(drainer.error)
    resumed = time.monotonic()
    eventually(lambda: good.count_between(resumed, time.monotonic()) >= 5)


# -- STOMP abusers ----------------------------------------------------------------------------


def stomp_socket(server: RoostProcess, connect: bool = True) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.stomp_port), timeout=5)
    if connect:
        s.sendall(STOMP_CONNECT)
        reply = b""
        while b"\x00" not in reply:
            reply += s.recv(4096)
        assert reply.startswith(b"CONNECTED"), reply
    return s


def read_to_close(s: socket.socket, timeout: float = 5.0) -> bytes:
    s.settimeout(timeout)
    chunks = []
    try:
        while data := s.recv(65536):
            chunks.append(data)
    except OSError:
        pass
    return b"".join(chunks)


def push_until_closed(s: socket.socket, chunk: bytes, limit: int) -> int:
    """Send ``chunk`` repeatedly until the server stops taking it; the bytes sent."""
    sent = 0
    s.settimeout(5)
    try:
        while sent < limit:
            s.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    return sent


def _endless(server: RoostProcess, start: bytes, chunk: bytes) -> tuple[bytes, int]:
    """Start a frame on a connected STOMP socket, then never end it: (the broker's
    reply, bytes pushed before it closed the socket)."""
    s = stomp_socket(server)
    s.sendall(start)
    sent = push_until_closed(s, chunk, limit=50 * 1024 * 1024)
    reply = read_to_close(s)
    s.close()
    return reply, sent


def test_stomp_abusers_while_amqp_is_served(server: RoostProcess, good: GoodClient) -> None:
    started = time.monotonic()
    # binary garbage instead of a frame
    s = stomp_socket(server, connect=False)
    s.sendall(bytes(range(1, 256)) * 4 + b"\n\n\x00")
    reply = read_to_close(s)
    s.close()
    assert reply.startswith(b"ERROR\n") and b"message:header is not valid UTF-8" in reply, reply

    # a header line that never ends: refused once it passes --stomp-max-header-length
    reply, sent = _endless(server, b"SEND\ndestination:/queue/abuse\nx-endless:", b"a" * 1024)
    assert b"message:header too long" in reply, reply
    assert sent < 4 * 1024 * 1024, sent  # dropped long before the offender was done

    # a body that never ends (no NUL): refused at --stomp-max-frame-size
    reply, sent = _endless(server, b"SEND\ndestination:/queue/abuse\n\n", b"b" * 4096)
    assert b"message:frame too large" in reply, reply
    assert sent < 4 * 1024 * 1024, sent
    served_during(good, started, time.monotonic())


def test_stomp_slowloris_is_dropped_at_the_handshake_timeout(
    server: RoostProcess, good: GoodClient
) -> None:
    """STOMP sockets that never finish CONNECT are held to --handshake-timeout too."""
    started = time.monotonic()
    stop = threading.Event()
    socks = [stomp_socket(server, connect=False) for _ in range(50)]
    try:
        def drip() -> None:
            text = STOMP_CONNECT[:-1]  # never the NUL
            i = 0
            while not stop.wait(0.1):
                for s in socks:
                    with contextlib.suppress(OSError):  # closed by the server already
                        s.send(text[i % len(text):][:1])
                i += 1

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        for s in socks:
            assert read_to_close(s, timeout=HANDSHAKE_TIMEOUT + 5) == b""
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT + 3
    finally:
        stop.set()
        for s in socks:
            s.close()
    served_during(good, started, time.monotonic())


def test_the_broker_is_whole_after_the_abuse(server: RoostProcess) -> None:
    """No connection of the offenders is left over and the broker still answers."""
    with http(server) as api:
        eventually(lambda: api.get("/connections").json() == [],
                 what=lambda: api.get("/connections").json())
        assert api.get("/overview").status_code == 200
