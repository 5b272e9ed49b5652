"""Test support: a real ``roost server`` subprocess on free ports, and a raw AMQP socket."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pika
import pytest
from aiohttp import web

READY_LINE = "Roost ready"
ROOT = Path(__file__).resolve().parents[1]
# the browser STOMP client that scripts/_stompjs.sh fetches from npm (never committed)
STOMPJS = ROOT / ".cache" / "stompjs" / "7.5.0" / "stomp.umd.min.js"
MQTTJS = ROOT / ".cache" / "mqttjs" / "5.16.0" / "mqtt.min.js"
T = TypeVar("T")


# the last ports handed out (bounded: a whole run probes more ports than the range holds)
_handed_out: collections.deque[int] = collections.deque(maxlen=512)


def free_port() -> int:
    """A port nothing listens on, and none of the last ones this process handed out: the
    kernel may offer a probed port again before its first taker binds it (three nodes'
    cluster ports are probed before any node starts)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.append(port)
            return port


class RoostProcess:
    """``roost server`` in a subprocess. Its log is kept for assertions and failures."""

    def __init__(self, data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra = list(extra)
        self.env = env or {}
        self.amqp_port = 0
        self.http_port = 0  # the management API; a free port, never the default 15672
        self.stomp_port = 0  # STOMP over TCP; a free port, never the default 61613
        self.ws_port = 0  # STOMP over WebSocket; a free port, never the default 15674
        self.prometheus_port = 0  # a free port, never the default 15692
        self.python = sys.executable  # another venv's python runs its installed roost
        self.mqtt_port = 0  # MQTT; a free port, never the default 1883
        self.mqtt_ws_port = 0  # MQTT over WebSocket; a free port, never the default 15675
        self.stream_port = 0  # the stream protocol; a free port, never the default 5552
        self.streams_port = 0  # the stream protocol over TLS (with a certificate), never 5551
        self.proc: subprocess.Popen[str] | None = None
        self.log_lines: list[str] = []
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def log(self) -> str:
        return "".join(self.log_lines)

    def start(self, timeout: float = 20.0) -> RoostProcess:
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.amqp_port = free_port()
            self.http_port = free_port()
            self.stomp_port = free_port()
            self.ws_port = free_port()
            self.prometheus_port = free_port()
            self.mqtt_port = free_port()
            self.mqtt_ws_port = free_port()
            self.stream_port = free_port()
            self.streams_port = free_port()
            cluster = as_cluster_node(self.extra, self.data_dir)
            args = [
                self.python,
                "-m",
                "roost",
                "server",
                "--amqp-port",
                str(self.amqp_port),
                "--data-dir",
                str(self.data_dir),
                "--http-port",
                str(self.http_port),
                "--stomp-port",
                str(self.stomp_port),
                "--ws-port",
                str(self.ws_port),
                "--prometheus-port",
                str(self.prometheus_port),
                "--mqtt-port",
                str(self.mqtt_port),
                "--mqtt-ws-port",
                str(self.mqtt_ws_port),
                "--stream-port",
                str(self.stream_port),
                "--streams-port",
                str(self.streams_port),
                *self.extra,
                *cluster,
            ]
            self._ready.clear()
            self.proc = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, **self.env},
            )
            threading.Thread(target=self._pump, args=(self.proc,), daemon=True).start()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                if self._ready.wait(0.05):
                    return self
            if self.proc.poll() is None:
                self.kill()
                raise RuntimeError(f"roost server did not become ready:\n{self.log}")
            if "address already in use" not in self.log.lower():  # asyncio says it in lower case
                break
        raise RuntimeError(f"roost server exited with {self.proc.returncode}:\n{self.log}")

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with proc.stdout:
            for line in proc.stdout:
                self.log_lines.append(line)
                if READY_LINE in line:
                    self._ready.set()

    def wait_for_log(self, text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log:
                return
            time.sleep(0.02)
        raise AssertionError(f"{text!r} never appeared in the server log:\n{self.log}")

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait: the graceful path."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ROOST_TEST_CLUSTER=1: every server the tests start is a 1-node cluster (docs/cluster.md),
# joined to one etcd for the whole run under a key prefix of its own
CLUSTER_MODE = os.environ.get("ROOST_TEST_CLUSTER") == "1"
_etcd: Any = None


def run_etcd() -> Any:
    """The run's etcd (roost.cluster.etcd_server.EtcdServer), started at first use and
    stopped when the run ends."""
    global _etcd
    if _etcd is None:
        import atexit
        import tempfile

        from roost.cluster.etcd_server import EtcdServer, find_etcd

        if find_etcd() is None:
            prerequisite("etcd is not installed (scripts/test installs Debian's etcd-server)")
        _etcd = EtcdServer(Path(tempfile.mkdtemp(prefix="roost-etcd-"))).start()
        atexit.register(_etcd.stop)
    return _etcd


def as_cluster_node(extra: list[str], data_dir: Path) -> list[str]:
    """The arguments that make a test's server a 1-node cluster in ROOST_TEST_CLUSTER mode
    (none otherwise, or when the test set --cluster itself). The key prefix and node name
    come from the data dir, so a restarted server is the same node again."""
    if not CLUSTER_MODE or "--cluster" in extra:
        return []
    import hashlib

    tag = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:12]
    url = run_etcd().url(f"/t-{tag}")
    return ["--cluster", url, "--node-name", f"roost-{tag}", "--cluster-port", str(free_port())]


class RawAMQP:
    """A bare socket for byte-level conformance tests (what no client library will send)."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_until_closed(self, limit: float = 5.0) -> bytes:
        """Everything the server sends until it closes the socket (or ``limit`` passes)."""
        self.sock.settimeout(limit)
        chunks = []
        with contextlib.suppress(OSError):
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                chunks.append(data)
        return b"".join(chunks)

    def recv_some(self, n: int = 65536, timeout: float = 5.0) -> bytes:
        self.sock.settimeout(timeout)
        return self.sock.recv(n)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawAMQP:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def running_server(tmp: Path, *extra: str) -> Iterator[RoostProcess]:
    server = RoostProcess(tmp, *extra).start()
    try:
        yield server
    finally:
        server.kill()


def restart(server: RoostProcess, *, kill: bool = False) -> RoostProcess:
    """The same server (data dir, arguments) started again, after a ``kill -9`` or a
    graceful stop that must exit 0; nothing in the run that ended may have crashed."""
    if kill:
        server.kill()
    else:
        assert server.stop() == 0, server.log
    assert "Traceback" not in server.log, server.log
    return RoostProcess(server.data_dir, *server.extra).start()


def drain(
    server: RoostProcess, queue: str, *, ack: bool = False
) -> list[tuple[pika.spec.Basic.GetOk, pika.BasicProperties, bytes]]:
    """(method, properties, body) of every message in ``queue`` (vhost /), by basic.get
    on a connection of its own: left in the queue (unacked, then requeued when that
    connection closes) unless ``ack``."""
    got: list[tuple[pika.spec.Basic.GetOk, pika.BasicProperties, bytes]] = []
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        while True:
            method, props, body = ch.basic_get(queue, auto_ack=ack)
            if method is None:
                return got
            got.append((method, props, body))


def eventually(
    check: Callable[[], T], timeout: float = 10.0, what: object = "", *, interval: float = 0.02
) -> T:
    """Poll ``check`` until it returns something truthy, and return that: for effects a
    client cannot await (a timer's samples, a socket's close reaching the broker). Fails
    after ``timeout`` seconds, saying ``what`` (called first if it is callable, so it can
    describe the state at that moment)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            shown = what() if callable(what) else what
            raise AssertionError(f"not within {timeout:g} s: {shown or 'condition never held'}")
        time.sleep(interval)


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """``eventually`` for a test running on an event loop: waits without blocking it."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def pump(conn: pika.BlockingConnection, until: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Process pika events until ``until()`` holds or ``timeout`` passes; the final check."""
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
    return until()


def settle(conn: pika.BlockingConnection, seconds: float = 0.3) -> None:
    """Process pika events for a while, to assert that nothing (more) arrives."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)


# the fsync timer of the ``slow_sync`` fixture (tests/conftest.py): a confirm, receipt or
# reply sent before the fsync it should follow is caught by this wide a gap
SLOW_SYNC_MS = 1500


def sync_ops(server: RoostProcess) -> int:
    """The broker's fsync count so far (``rabbitmq_io_sync_ops_total`` in /metrics)."""
    import re

    import httpx

    text = httpx.get(server.http_url + "/metrics").text
    match = re.search(r"^rabbitmq_io_sync_ops_total (\d+)", text, re.MULTILINE)
    assert match is not None, text
    return int(match.group(1))


def running(server: RoostProcess) -> Iterator[RoostProcess]:
    """For fixtures (``yield from running(RoostProcess(...))``): the started server, then
    killed, with a check that nothing in it crashed."""
    yield server.start()
    server.kill()
    assert "Traceback" not in server.log, server.log


def prerequisite(missing: str) -> None:
    """A test cannot run: ``missing`` says what is absent (a tool, root, a mount). scripts/test
    installs what the suite needs and sets ROOST_REQUIRE_TOOLS=1, so there (and in CI) the
    test fails instead of quietly skipping; under plain pytest elsewhere it skips."""
    if os.environ.get("ROOST_REQUIRE_TOOLS") == "1":
        pytest.fail(f"{missing} (scripts/test runs with ROOST_REQUIRE_TOOLS=1)", pytrace=False)
    pytest.skip(missing)


def chromium() -> str:
    """Debian's chromium (Playwright never downloads a browser here)."""
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
    )
    if found is None:
        prerequisite("chromium is not installed")
    assert found is not None
    return found


def playwright_sync_api() -> ModuleType:
    try:
        import playwright.sync_api
    except ImportError:
        prerequisite("playwright is not installed")
        raise
    return playwright.sync_api


# headless, and none of Chromium's own traffic (updates, sync, QUIC probes) on the box
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def browser_page(**context: Any) -> Iterator[Any]:
    """A page in headless Chromium (Debian's, through Playwright) with a 15 s default
    timeout; ``context`` goes to ``new_context`` (a viewport, say). Closed on leaving."""
    executable = chromium()
    sync_api = playwright_sync_api()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=BROWSER_ARGS, headless=True)
        try:
            page = browser.new_context(**context).new_page()
            page.set_default_timeout(15_000)
            yield page
        finally:
            browser.close()


def live_objects(kinds: dict[str, type]) -> dict[str, int]:
    """How many objects of each exact type the collector tracks now: a release test's
    count (mypyc's compiled classes take no weak references to watch them by)."""
    counts = dict.fromkeys(kinds, 0)
    for obj in gc.get_objects():
        for name, kind in kinds.items():
            if type(obj) is kind:
                counts[name] += 1
    return counts


async def start_site(app: web.Application) -> tuple[web.AppRunner, int]:
    """``app`` served on loopback at a port the kernel picks: its runner (to clean up)
    and the port."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
