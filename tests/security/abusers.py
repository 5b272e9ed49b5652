"""Abusive clients and one well-behaved client, shared by tests/security/test_abuse.py and
bench/abuse_latency.py. Each abuser runs in a thread until stopped, so a test (or the
benchmark) can watch the good client while the abuse goes on."""

from __future__ import annotations

import contextlib
import itertools
import re
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pika
from pika.exceptions import AMQPError

from roost.amqp import codec_methods as m
from roost.amqp.codec import (
    NEED_DATA,
    PROTOCOL_HEADER,
    FrameReader,
    MethodFrame,
    encode_method_frame,
)


def params(url: str, **kw: Any) -> pika.URLParameters:
    p = pika.URLParameters(url)
    for key, value in kw.items():
        setattr(p, key, value)
    return p


# -- the well-behaved client ------------------------------------------------------------------


class GoodClient(threading.Thread):
    """Publishes one message at a time with publisher confirms and waits until its own
    consumer (a second channel on the same connection) has it: one round trip each.
    Records the latency and completion time of every round trip, every confirmed and
    every received message, and the first error."""

    def __init__(self, url: str, queue: str, *, body_size: int = 16, limit: int = 0,
                 round_trip_timeout: float = 10.0) -> None:
        super().__init__(daemon=True, name="good-client")
        self.url = url
        self.queue = queue
        self.body_size = body_size
        self.limit = limit  # stop after this many round trips (0: until stop())
        self.round_trip_timeout = round_trip_timeout
        self.latencies: list[float] = []
        self.stamps: list[float] = []  # monotonic end of each round trip
        self.confirmed: set[int] = set()
        self.received: list[int] = []  # in arrival order, duplicates kept
        self._got: set[int] = set()
        self.error: BaseException | None = None
        self.ready = threading.Event()  # connected and consuming
        self.go = threading.Event()  # clear it before start() to hold the round trips
        self.go.set()
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by check(), not lost in the thread
            self.error = exc
        finally:
            self.ready.set()

    def _run(self) -> None:
        conn = pika.BlockingConnection(params(self.url, heartbeat=0))
        pub = conn.channel()
        pub.confirm_delivery()
        pub.queue_declare(self.queue, auto_delete=True)
        sub = conn.channel()

        def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
            self.received.append(int(body[:12]))
            self._got.add(int(body[:12]))
            ch.basic_ack(method.delivery_tag)

        sub.basic_consume(self.queue, on_message)
        self.ready.set()
        self.go.wait()
        pad = b"." * max(0, self.body_size - 12)
        n = 0
        while not self._halt.is_set() and not (self.limit and n >= self.limit):
            started = time.perf_counter()
            pub.basic_publish("", self.queue, b"%012d" % n + pad)  # raises on nack/return
            self.confirmed.add(n)
            deadline = time.monotonic() + self.round_trip_timeout
            while n not in self._got:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"message {n} was confirmed but not delivered")
                conn.process_data_events(time_limit=0.01)
            self.latencies.append(time.perf_counter() - started)
            self.stamps.append(time.monotonic())
            n += 1
        conn.close()

    def stop(self, timeout: float = 15.0) -> None:
        self._halt.set()
        self.join(timeout)

    def count_between(self, start: float, end: float) -> int:
        return sum(start <= t <= end for t in self.stamps)

    def longest_gap(self) -> float:
        """The longest wait between two completed round trips (service interruption)."""
        return max((b - a for a, b in itertools.pairwise(self.stamps)), default=0.0)

    def check(self) -> None:
        """The client never failed and lost nothing it had confirmed."""
        assert self.error is None, repr(self.error)
        assert self.confirmed <= set(self.received), sorted(self.confirmed - set(self.received))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -- raw AMQP ---------------------------------------------------------------------------------


class RawPeer:
    """A bare socket that completes the AMQP handshake as guest and reads frames. A
    ``channel_max`` or ``frame_max`` (default: the server's) the server refuses leaves
    its connection.close in ``refusal``."""

    def __init__(
        self,
        port: int,
        timeout: float = 5.0,
        channel_max: int | None = None,
        frame_max: int | None = None,
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = FrameReader(expect_protocol_header=False)
        self.sock.sendall(PROTOCOL_HEADER)
        self.expect(m.ConnectionStart)
        self.sock.sendall(encode_method_frame(0, m.ConnectionStartOk(
            client_properties={"product": "abuser"}, mechanism="PLAIN",
            response=b"\x00guest\x00guest", locale="en_US")))
        tune = self.expect(m.ConnectionTune)
        # the server's own limits: RabbitMQ refuses a channel_max of 0 ("no limit")
        self.sock.sendall(encode_method_frame(0, m.ConnectionTuneOk(
            channel_max=tune.channel_max if channel_max is None else channel_max,
            frame_max=tune.frame_max if frame_max is None else frame_max, heartbeat=0)))
        self.sock.sendall(encode_method_frame(0, m.ConnectionOpen(virtual_host="/")))
        reply = self.method()
        self.refusal: m.ConnectionClose | None = None
        if isinstance(reply, m.ConnectionClose):
            self.refusal = reply
        else:
            assert isinstance(reply, m.ConnectionOpenOk), reply

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def method(self) -> Any:
        """The next method (heartbeats and content skipped); EOFError when closed."""
        while True:
            frame = self.reader.next_frame()
            if frame is NEED_DATA:
                data = self.sock.recv(65536)
                if not data:
                    raise EOFError("server closed the socket")
                self.reader.feed(data)
            elif isinstance(frame, MethodFrame):
                return frame.method

    def expect(self, cls: type) -> Any:
        method = self.method()
        assert isinstance(method, cls), method
        return method

    def open_channel(self, ch: int = 1) -> None:
        self.send(encode_method_frame(ch, m.ChannelOpen()))
        self.expect(m.ChannelOpenOk)

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """True when the server closes the socket within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
        except TimeoutError:
            return False
        except OSError:
            pass
        return True

    def close(self) -> None:
        self.sock.close()


def oversized_frame_header(channel: int = 1, size: int = 0x7FFF_FFF0) -> bytes:
    """The first 7 bytes of a method frame claiming ``size`` bytes of payload: the broker
    must refuse it from the header alone, before any of that payload arrives."""
    return struct.pack(">BHI", 1, channel, size) + b"\x00\x3c\x00\x28"


def huge_frame(port: int) -> int:
    """One abuser: handshake, then a frame far above frame_max. The reply code of the
    connection.close the broker sends (0 if it closed without one)."""
    peer = RawPeer(port)
    try:
        peer.open_channel()
        peer.send(oversized_frame_header())
        try:
            close = peer.expect(m.ConnectionClose)
        except EOFError:
            return 0
        with contextlib.suppress(OSError):
            peer.send(encode_method_frame(0, m.ConnectionCloseOk()))
        return int(close.reply_code)
    finally:
        peer.close()


# -- slowloris --------------------------------------------------------------------------------


class Slowloris(threading.Thread):
    """``count`` sockets that send the AMQP header, then a connection.start-ok frame (or
    ``script``: an HTTP request that never ends its headers…), one byte per ``interval``
    seconds each. Records how long each lived before the server closed it. With
    ``keep_up`` a closed socket is replaced by a new one (benchmark)."""

    def __init__(self, port: int, count: int = 200, interval: float = 0.1,
                 keep_up: bool = False, script: bytes | None = None) -> None:
        super().__init__(daemon=True, name="slowloris")
        self.port = port
        self.count = count
        self.interval = interval
        self.keep_up = keep_up
        self.lifetimes: list[float] = []
        self.sent_bytes = 0
        self.refused = 0  # connect() failed
        self.all_closed = threading.Event()
        self._halt = threading.Event()
        start_ok = encode_method_frame(0, m.ConnectionStartOk(
            client_properties={"product": "slowloris"}, mechanism="PLAIN",
            response=b"\x00guest\x00guest", locale="en_US"))
        self.script = PROTOCOL_HEADER + start_ok if script is None else script

    def _open(self, sel: selectors.BaseSelector) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            self.refused += 1
            return
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, [time.monotonic(), 0])

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        for _ in range(self.count):
            self._open(sel)
        next_drip = time.monotonic()
        while not self._halt.is_set() and sel.get_map():
            for key, _ev in sel.select(timeout=max(0.0, next_drip - time.monotonic())):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:  # the server dropped us
                    self._closed(sel, sock, key.data[0])
            if time.monotonic() >= next_drip:
                next_drip += self.interval
                for key in list(sel.get_map().values()):
                    sock, state = key.fileobj, key.data  # type: ignore[assignment]
                    byte = self.script[state[1] % len(self.script):][:1]
                    try:
                        sock.send(byte)  # type: ignore[union-attr]
                        state[1] += 1
                        self.sent_bytes += 1
                    except OSError:
                        self._closed(sel, sock, state[0])  # type: ignore[arg-type]
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        sel.close()
        self.all_closed.set()

    def _closed(self, sel: selectors.BaseSelector, sock: socket.socket, opened: float) -> None:
        self.lifetimes.append(time.monotonic() - opened)
        sel.unregister(sock)
        sock.close()
        if self.keep_up and not self._halt.is_set():
            self._open(sel)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


# -- connection flood -------------------------------------------------------------------------

_REFUSAL = re.compile(r"\((\d+)\) [\"'](.*)[\"']")


def try_connect(url: str, timeout: float = 5.0) -> pika.BlockingConnection | str:
    """An open connection, or the broker's refusal as 'CODE TEXT' (else the error's repr:
    RabbitMQ's connection_max leaves extra sockets unanswered, a handshake timeout)."""
    try:
        return pika.BlockingConnection(params(url, heartbeat=0, connection_attempts=1,
                                              socket_timeout=timeout, stack_timeout=timeout))
    except AMQPError as exc:
        found = _REFUSAL.search(str(exc.args[0]) if exc.args else "")
        return f"{found[1]} {found[2]}" if found else repr(exc)
    except Exception as exc:  # pika's connector timeouts are not AMQPErrors
        return repr(exc)


class Flood(threading.Thread):
    """Opens ``count`` AMQP connections as fast as it can (``workers`` threads) and keeps
    those that succeed until stopped; collects the refusals."""

    def __init__(self, url: str, count: int, workers: int = 4, repeat: bool = False) -> None:
        super().__init__(daemon=True, name="flood")
        self.url = url
        self.count = count
        self.workers = workers
        self.repeat = repeat  # benchmark: close everything and flood again until stopped
        self.opened: list[pika.BlockingConnection] = []
        self.refusals: list[str] = []
        self.done = threading.Event()
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def _worker(self, n: int) -> None:
        for _ in range(n):
            result = try_connect(self.url)
            with self._lock:
                if isinstance(result, str):
                    self.refusals.append(result)
                else:
                    self.opened.append(result)

    def run(self) -> None:
        while True:
            share = [self.count // self.workers + (i < self.count % self.workers)
                     for i in range(self.workers)]
            threads = [threading.Thread(target=self._worker, args=(n,), daemon=True)
                       for n in share]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.done.set()
            if not self.repeat or self._halt.is_set():
                break
            self.close_all()
        self._halt.wait()

    def close_all(self) -> None:
        with self._lock:
            conns, self.opened = self.opened, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        self.close_all()


# -- publish storm ----------------------------------------------------------------------------


class PublishStorm:
    """``publishers`` threads publishing ``size``-byte messages with confirms as fast as
    they can. Records every confirmed body and every connection.blocked / unblocked."""

    def __init__(self, url: str, queue: str, publishers: int = 3, size: int = 64 * 1024) -> None:
        self.url = url
        self.queue = queue
        self.size = size
        self.confirmed: list[bytes] = []
        self.events: list[str] = []
        self.errors: list[BaseException] = []
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._publish, args=(i,), daemon=True)
                        for i in range(publishers)]

    def start(self) -> PublishStorm:
        for t in self.threads:
            t.start()
        return self

    def _publish(self, index: int) -> None:
        conn: pika.BlockingConnection | None = None
        try:
            conn = pika.BlockingConnection(params(self.url, heartbeat=0))
            conn.add_on_connection_blocked_callback(
                lambda _c, f: self._event(f"blocked: {f.method.reason}"))
            conn.add_on_connection_unblocked_callback(lambda _c, _f: self._event("unblocked"))
            ch = conn.channel()
            ch.confirm_delivery()
            pad = b"s" * max(0, self.size - 16)
            n = 0
            while not self._halt.is_set():
                body = b"%04d:%011d" % (index, n)
                ch.basic_publish("", self.queue, body + pad)
                with self._lock:
                    self.confirmed.append(body)
                n += 1
                # pika's BlockingConnection runs connection callbacks (blocked, unblocked)
                # only here, not inside a publish that waits for its confirm
                conn.process_data_events(time_limit=0)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            if conn is not None and conn.is_open:
                with contextlib.suppress(AMQPError):
                    conn.close()

    def _event(self, text: str) -> None:
        with self._lock:
            self.events.append(text)

    def halt(self) -> None:
        """Ask the publishers to stop after their current publish (a blocked one waits)."""
        self._halt.set()

    def stop(self, timeout: float = 30.0) -> None:
        self._halt.set()
        for t in self.threads:
            t.join(timeout)


class Drainer(threading.Thread):
    """A consumer that acks everything from ``queue``; ``seen`` maps body key -> count."""

    def __init__(self, url: str, queue: str, prefetch: int = 50) -> None:
        super().__init__(daemon=True, name="drainer")
        self.url = url
        self.queue = queue
        self.prefetch = prefetch
        self.seen: dict[bytes, int] = {}
        self.stamps: list[float] = []
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            conn = pika.BlockingConnection(params(self.url, heartbeat=0))
            ch = conn.channel()
            ch.queue_declare(self.queue)
            ch.basic_qos(prefetch_count=self.prefetch)

            def on_message(c: Any, method: Any, _p: Any, body: bytes) -> None:
                key = body[:16]
                self.seen[key] = self.seen.get(key, 0) + 1
                self.stamps.append(time.monotonic())
                c.basic_ack(method.delivery_tag)

            ch.basic_consume(self.queue, on_message)
            self.ready.set()
            while not self._halt.is_set():
                conn.process_data_events(time_limit=0.05)
            conn.close()
        except BaseException as exc:
            self.error = exc
            self.ready.set()

    def drained(self, keys: list[bytes]) -> Callable[[], bool]:
        return lambda: all(k in self.seen for k in keys)

    def stop(self) -> None:
        self._halt.set()
        self.join(15)
