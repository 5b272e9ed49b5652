"""Round-trip latency of a well-behaved client while others abuse the broker.

    .venv/bin/python bench/abuse_latency.py [--brokers roost,rabbitmq]
        [--scenarios none,slowloris,flood,huge,storm,get,alarm] [--repeat 3] [--messages 3000]

The good client (tests/security/abusers.py: GoodClient) publishes one 16-byte message
at a time with publisher confirms and waits until its own consumer has it; p50 and p99
of that round trip over ``--messages`` messages, with no abuse and during each abuse
scenario. The abuser runs in its own process (so that it does not share the good
client's GIL) and keeps going for the whole measurement:

- slowloris: 200 sockets dripping the AMQP header and a start-ok one byte per 100 ms
  each; every one the handshake timeout (1 s) drops is replaced;
- flood: 4 threads opening 60 connections against a limit of 30, closing them, again;
- huge: raw connections sending a frame header that claims 2 GiB, one after another;
- storm: 3 publishers of 64 KiB messages with confirms, one consumer draining;
- alarm: the storm, then the memory watermark set to 1 MiB (far below either broker's
  RSS) until the measurement ends.

During the memory alarm both brokers block every connection that publishes, the good
client's too, so the alarm scenario measures a client that does not publish instead: on
a connection of its own, ``--messages`` basic.get round trips (auto-ack) on a queue of
16-byte messages filled before the abuse starts; the "get" scenario is that client with
no abuse, its baseline.

The "abuse/s" columns are what the abuser achieved per second, from its start to the end
of the measurement (sockets dropped, connections refused, huge frames answered with 501,
storm messages confirmed), so that a run where the abuse did not happen shows. For the
alarm they are the storm's confirms during the measurement only (about 0 when it was
blocked), followed by how many of the 3 storm publishers got connection.blocked (the
fewest over the runs): a run without an alarm shows.

Every scenario runs ``--repeat`` times per broker, brokers alternating; the table shows
medians. Both brokers get the same limits (handshake timeout 1 s, 30 connections).
The watermark is moved at run time (Roost: the management API, on a port opened only when
the alarm scenario is selected; RabbitMQ: rabbitmqctl), then set back to both brokers'
default, 0.4.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import pika

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package

sys.path.insert(0, str(_brokers.ROOT))
from tests.security.abusers import (  # after the path is set
    Drainer,
    Flood,
    GoodClient,
    PublishStorm,
    Slowloris,
    huge_frame,
    params,
    percentile,
)

SCENARIOS = ["none", "slowloris", "flood", "huge", "storm", "get", "alarm"]
TITLES = {
    "none": "no abuse",
    "slowloris": "slowloris (200 sockets, 1 byte / 100 ms each)",
    "flood": "connection flood (60 at a time, limit 30)",
    "huge": "huge frames (2 GiB frame headers, back to back)",
    "storm": "publish storm (3 publishers, 64 KiB, confirms)",
    "get": "no abuse (basic.get, not publishing: the alarm row's baseline)",
    "alarm": "publish storm past the memory watermark (basic.get, not publishing)",
}
ROOST_ARGS = ("--handshake-timeout", "1", "--max-connections", "30")
RABBITMQ_CONF = "handshake_timeout = 1000\nconnection_max = 30\n"
STORM_PUBLISHERS = 3
ALARM_WATERMARK = "1MiB"  # far below either broker's RSS: the alarm is on at once
DEFAULT_WATERMARK = "0.4"  # both brokers' default, which the launchers leave alone


def _abuse(kind: str, url: str, stop: Any, started: Any, done: Any, blocked: Any) -> None:
    """Runs in a child process until ``stop`` is set; ``done`` counts what the abuse
    achieved (sockets dropped, connections refused, frames refused, messages confirmed),
    so that a run where the abuser silently failed shows. ``blocked``: how many storm
    publishers got connection.blocked, set once they have stopped (pika records the event
    only when a publish returns, so a blocked one shows it after the alarm)."""
    port = urlparse(url).port or 5672
    finish: Callable[[], None]
    events: list[str] = []  # the storm's connection.blocked / unblocked
    if kind == "slowloris":
        loris = Slowloris(port, count=200, interval=0.1, keep_up=True)
        loris.start()
        finish, count = loris.stop, lambda: len(loris.lifetimes)
    elif kind == "flood":
        flood = Flood(url, count=60, workers=4, repeat=True)
        flood.start()
        finish, count = flood.stop, lambda: len(flood.refusals)
    elif kind == "huge":
        refused = [0]

        def hammer() -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError, AssertionError, EOFError):
                    refused[0] += huge_frame(port) == 501

        thread = threading.Thread(target=hammer, daemon=True)
        thread.start()
        finish, count = thread.join, lambda: refused[0]
    elif kind in ("storm", "alarm"):  # the alarm is raised by measure_get()
        queue = f"storm-{uuid.uuid4().hex[:8]}"
        drainer = Drainer(url, queue)
        drainer.start()
        drainer.ready.wait(10)
        storm = PublishStorm(url, queue, publishers=STORM_PUBLISHERS, size=64 * 1024).start()
        events = storm.events

        def finish() -> None:
            storm.stop()
            drainer.stop()

        count = lambda: len(storm.confirmed)  # noqa: E731
    else:
        raise ValueError(kind)
    started.set()
    while not stop.wait(0.1):
        done.value = count()
    finish()
    blocked.value = sum(e.startswith("blocked") for e in events)


@contextlib.contextmanager
def abuse(kind: str, url: str, done: Any, blocked: Any = None) -> Iterator[None]:
    if kind == "none":
        yield
        return
    ctx = multiprocessing.get_context("spawn")
    stop, started = ctx.Event(), ctx.Event()
    blocked = ctx.Value("q", 0) if blocked is None else blocked
    proc = ctx.Process(target=_abuse, args=(kind, url, stop, started, done, blocked),
                       daemon=True)
    proc.start()
    try:
        if not started.wait(30):
            raise RuntimeError(f"abuser {kind} did not start")
        time.sleep(1.0)  # let the abuse reach its steady state before measuring
        yield
    finally:
        stop.set()
        proc.join(60)
        if proc.is_alive():
            proc.kill()
            proc.join()


def measure(url: str, kind: str, messages: int) -> dict[str, float]:
    # connected before the abuse starts (a flood would take its slot), measured during it
    client = GoodClient(url, f"good-{uuid.uuid4().hex[:8]}", limit=messages,
                        round_trip_timeout=30)
    client.go.clear()
    client.start()
    client.ready.wait(30)
    done = multiprocessing.get_context("spawn").Value("q", 0)
    with abuse(kind, url, done):
        abuse_started = time.monotonic() - (1.0 if kind != "none" else 0.0)  # + warm-up
        client.go.set()
        client.join(300)
        rate = done.value / max(1e-3, time.monotonic() - abuse_started)
    if client.error is not None or len(client.latencies) < messages:
        raise RuntimeError(f"good client failed during {kind}: {client.error!r}")
    client.check()
    ms = [x * 1000 for x in client.latencies]
    return {"p50": percentile(ms, 0.5), "p99": percentile(ms, 0.99), "max": max(ms),
            "abuse": rate}


class GetProbe(threading.Thread):
    """The alarm scenario's well-behaved client, which never publishes on its connection
    (during the alarm both brokers block a connection that does). It fills ``queue`` with
    ``messages`` 16-byte messages over a connection of its own, then, once ``go`` is set,
    takes them back one basic.get (auto-ack) at a time, timing each round trip."""

    def __init__(self, url: str, queue: str, messages: int) -> None:
        super().__init__(daemon=True, name="get-probe")
        self.url = url
        self.queue = queue
        self.messages = messages
        self.latencies: list[float] = []
        self.error: BaseException | None = None
        self.ready = threading.Event()  # filled and connected (or failed)
        self.go = threading.Event()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by measure_get(), not lost in the thread
            self.error = exc
        finally:
            self.ready.set()

    def _run(self) -> None:
        with pika.BlockingConnection(params(self.url, heartbeat=0)) as filler:
            ch = filler.channel()
            ch.queue_declare(self.queue)
            ch.confirm_delivery()
            for n in range(self.messages):
                ch.basic_publish("", self.queue, b"%016d" % n)
        with pika.BlockingConnection(params(self.url, heartbeat=0)) as conn:
            ch = conn.channel()
            self.ready.set()
            self.go.wait()
            for n in range(self.messages):
                started = time.perf_counter()
                method, _props, body = ch.basic_get(self.queue, auto_ack=True)
                self.latencies.append(time.perf_counter() - started)
                if method is None or body != b"%016d" % n:
                    raise RuntimeError(f"message {n} of {self.queue} missing: got {body!r}")
            ch.queue_delete(self.queue)


def _roost_watermark(http_port: int, limit: str) -> None:
    """Roost takes the watermark over its management API (RabbitMQ's has no such call)."""
    base = f"http://127.0.0.1:{http_port}/api"
    auth = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
    with urllib.request.urlopen(urllib.request.Request(f"{base}/nodes", headers=auth),
                                timeout=10) as reply:
        node = json.load(reply)[0]["name"]
    put = urllib.request.Request(
        f"{base}/nodes/{quote(node, safe='')}/vm-memory-high-watermark", method="PUT",
        data=json.dumps({"limit": limit}).encode(),
        headers={**auth, "Content-Type": "application/json"})
    urllib.request.urlopen(put, timeout=10).close()  # raises unless 2xx


def _rabbitmqctl(url: str, *args: str) -> None:
    """rabbitmqctl against the node behind ``url``. The launcher yields only the URL, so
    its temp dir is found by the listener its rabbitmq.conf names (that dir's home/ holds
    the Erlang cookie); the node is named after this process (bench/_brokers.py)."""
    listener = f"listeners.tcp.default = 127.0.0.1:{urlparse(url).port}\n"
    homes = []
    for conf in Path(tempfile.gettempdir()).glob("bench-rabbitmq-*/rabbitmq.conf"):
        with contextlib.suppress(OSError):  # another user's
            if conf.read_text().startswith(listener):
                homes.append(conf.parent / "home")
    if len(homes) != 1:
        raise RuntimeError(f"no single bench RabbitMQ node on {url}: {homes}")
    done = subprocess.run(
        [str(_brokers.RABBITMQ_BIN / "rabbitmqctl"), "-n", f"bench-{os.getpid()}@localhost",
         *args], env={**os.environ, "HOME": str(homes[0])}, capture_output=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)}: {done.stderr.decode()}")


def set_alarm(broker: str, url: str, http_port: int, on: bool) -> None:
    """Raise the memory alarm (watermark below the broker's RSS) or clear it."""
    if broker == "roost":
        _roost_watermark(http_port, ALARM_WATERMARK if on else DEFAULT_WATERMARK)
    else:
        limit = ["absolute", ALARM_WATERMARK] if on else [DEFAULT_WATERMARK]
        _rabbitmqctl(url, "set_vm_memory_high_watermark", *limit)


def wait_for_stall(done: Any, quiet: float = 1.0, timeout: float = 30.0) -> None:
    """Until the storm's confirm count has stood still ``quiet`` seconds: the alarm has
    blocked it. After ``timeout`` measure anyway; the row's abuse/s shows the storm went on."""
    deadline = time.monotonic() + timeout
    last, since = done.value, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if done.value != last:
            last, since = done.value, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def measure_get(
    broker: str, url: str, messages: int, http_port: int, alarm: bool
) -> dict[str, float]:
    """The GetProbe's round trips, during the alarm scenario or (``alarm`` False, the
    "get" row) with no abuse at all, for a baseline of the same operation."""
    probe = GetProbe(url, f"probe-{uuid.uuid4().hex[:8]}", messages)
    probe.start()  # filled and connected before the abuse starts, measured during the alarm
    probe.ready.wait(60)
    if probe.error is not None:
        raise RuntimeError(f"probe failed before the alarm: {probe.error!r}")
    if not alarm:
        probe.go.set()
        probe.join(300)
        if probe.error is not None or len(probe.latencies) < messages:
            raise RuntimeError(f"probe failed: {probe.error!r}")
        ms = [x * 1000 for x in probe.latencies]
        return {"p50": percentile(ms, 0.5), "p99": percentile(ms, 0.99), "max": max(ms),
                "abuse": 0.0}
    ctx = multiprocessing.get_context("spawn")
    done, blocked = ctx.Value("q", 0), ctx.Value("q", 0)
    with abuse("alarm", url, done, blocked):
        set_alarm(broker, url, http_port, on=True)
        try:
            wait_for_stall(done)
            confirmed, started = done.value, time.monotonic()
            probe.go.set()
            probe.join(300)
            rate = (done.value - confirmed) / max(1e-3, time.monotonic() - started)
        finally:
            # before the abuser stops: its blocked publishers return only once let through
            set_alarm(broker, url, http_port, on=False)
    if probe.error is not None or len(probe.latencies) < messages:
        raise RuntimeError(f"probe failed during the alarm: {probe.error!r}")
    ms = [x * 1000 for x in probe.latencies]
    return {"p50": percentile(ms, 0.5), "p99": percentile(ms, 0.99), "max": max(ms),
            "abuse": rate, "blocked": blocked.value}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--messages", type=int, default=3000)
    args = ap.parse_args()
    brokers = [b for b in args.brokers.split(",") if b]
    if "rabbitmq" in brokers and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipping it", file=sys.stderr)
        brokers.remove("rabbitmq")
    scenarios = [s for s in args.scenarios.split(",") if s]
    # the alarm scenario sets Roost's watermark over HTTP; the others run without it
    http_port = _brokers.free_port()
    roost_args = ROOST_ARGS + (("--http-port", str(http_port)) if "alarm" in scenarios else ())
    launchers: dict[str, Callable[[], Any]] = {
        "roost": lambda: _brokers.roost(*roost_args),  # a later --http-port wins
        "rabbitmq": lambda: _brokers.rabbitmq(extra_conf=RABBITMQ_CONF),
    }
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        urls = {b: stack.enter_context(launchers[b]()) for b in brokers}
        for scenario in scenarios:
            for run in range(args.repeat):
                order = brokers if run % 2 == 0 else brokers[::-1]
                for broker in order:
                    if scenario in ("get", "alarm"):
                        figures = measure_get(broker, urls[broker], args.messages, http_port,
                                              alarm=scenario == "alarm")
                    else:
                        figures = measure(urls[broker], scenario, args.messages)
                    results.setdefault((broker, scenario), []).append(figures)
                    print(f"{broker} {scenario} run {run + 1}: p50 {figures['p50']:.2f} ms "
                          f"p99 {figures['p99']:.2f} ms max {figures['max']:.1f} ms, "
                          f"abuse {figures['abuse']:.0f}/s"
                          + (f", {figures['blocked']:.0f} blocked" if "blocked" in figures else ""),
                          file=sys.stderr, flush=True)
    print_table(brokers, scenarios, results)


def print_table(brokers: list[str], scenarios: list[str],
                results: dict[tuple[str, str], list[dict[str, float]]]) -> None:
    head = ["scenario"]
    for b in brokers:
        head += [f"{_brokers.TITLES[b]} p50 ms", f"{_brokers.TITLES[b]} p99 ms"]
    if len(brokers) == 2:
        head.append("p99 ratio (Roost / RabbitMQ)")
    head += [f"{_brokers.TITLES[b]} abuse/s" for b in brokers]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for s in scenarios:
        row = [TITLES[s]]
        p99s = []
        for b in brokers:
            runs = results[(b, s)]
            p50 = statistics.median(r["p50"] for r in runs)
            p99 = statistics.median(r["p99"] for r in runs)
            p99s.append(p99)
            row += [f"{p50:.2f}", f"{p99:.2f}"]
        if len(brokers) == 2:
            row.append(f"{p99s[0] / p99s[1]:.2f}")
        row += [abuse_cell(results[(b, s)]) for b in brokers]
        print("| " + " | ".join(row) + " |")


def abuse_cell(runs: list[dict[str, float]]) -> str:
    """The median rate; for the alarm, also the fewest storm publishers blocked in a run,
    so that one run without the alarm shows."""
    cell = f"{statistics.median(r['abuse'] for r in runs):.0f}"
    if "blocked" in runs[0]:
        cell += f" ({min(r['blocked'] for r in runs):.0f}/{STORM_PUBLISHERS} blocked)"
    return cell


if __name__ == "__main__":
    main()
