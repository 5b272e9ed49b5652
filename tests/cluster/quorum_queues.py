"""Quorum queues in the cluster tests: confirmed publishers and acking consumers run in
threads, their members and leader as the nodes and ctl show them, and the history checks."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time

import httpx
import pika

from tests.cluster.history import History, body
from tests.cluster.nodes import queue_json
from tests.confirming import publish_confirmed
from tests.support import RoostProcess, browser_page, eventually

QUORUM = {"x-queue-type": "quorum"}
PREFETCH = 50  # the consumer's


def publisher(
    server: RoostProcess, name: str, queue: str, h: History, stop: threading.Event,
    times: list[tuple[float, float]],
) -> None:  # fmt: skip
    """Publishes in order with confirms, persistent; a nacked or unanswered publish is
    republished under the next id (a nacked message may still arrive: at least once, so
    the checker must not take its republished copy for a redelivery). ``times``: (began,
    confirmed)."""

    def settled(n: int, ok: bool, began: float) -> None:
        h.confirm((name, n), ok=ok)
        if ok:
            times.append((began, time.monotonic()))

    publish_confirmed(
        server.url, queue, stop, lambda n: body(name, n, 256), settled,
        sending=lambda n: h.publish((name, n), queue), persistent=True,
    )  # fmt: skip


def consumer(
    server: RoostProcess, queue: str, h: History, stop: threading.Event,
    hold: threading.Event, killed: threading.Event, counts: list[int],
    holding: threading.Event | None = None,
) -> None:  # fmt: skip
    """Acks each delivery, except while ``hold`` is set before the kill: those are
    acked after the kill without being recorded (the dead leader never sees the ack, so
    the new one rightly delivers them again, unless their acks reach this node's
    stand-in first: it settles them there). ``counts``: x-delivery-count of
    redeliveries. ``holding`` is set once a whole prefetch is held unacked: what the
    leader hands out from then on waits in the stand-in, delivered and never acked."""
    stale: list[int] = []
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=PREFETCH)
        for method, props, raw in ch.consume(queue, inactivity_timeout=0.1):
            if killed.is_set() and stale:
                for tag in stale:
                    ch.basic_ack(tag)
                stale.clear()
            if method is None:
                if stop.is_set():
                    break
                continue
            msg = h.deliver("c", raw, method.redelivered)
            if method.redelivered:
                counts.append(int((props.headers or {}).get("x-delivery-count", 0)))
            if hold.is_set() and not killed.is_set():
                stale.append(method.delivery_tag)
                if holding is not None and len(stale) >= PREFETCH:
                    holding.set()
                continue
            ch.basic_ack(method.delivery_tag)
            h.ack(msg)


def wind_down(
    h: History,
    publishers: list[threading.Thread],
    consumer_thread: threading.Thread,
    stop: threading.Event,
    stop_publishing: threading.Event,
) -> None:
    """Stops the publishers, lets the consumer catch up with everything confirmed (the
    checker says what it did not get) and stops it."""
    stop_publishing.set()
    for t in publishers:
        t.join(20)
    with contextlib.suppress(AssertionError):
        eventually(lambda: h.confirmed <= {m for _q, m, _r in h.deliveries}, 20)
    stop.set()
    consumer_thread.join(20)


def confirm_in_background(
    server: RoostProcess, queue: str, message: bytes, wait: float
) -> tuple[threading.Thread, list[str]]:
    """Publishes ``message`` with a confirm from a thread, waits ``wait`` seconds and
    returns the thread and its outcome (``["confirmed"]`` once confirmed)."""
    outcome: list[str] = []

    def publish_one() -> None:
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("", queue, message)
            outcome.append("confirmed")

    t = threading.Thread(target=publish_one)
    t.start()
    t.join(wait)
    return t, outcome


def ctl(server: RoostProcess, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "roost", "ctl", "--url", server.http_url, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode == 0) == ok, (args, done.stdout, done.stderr)
    return done


def members(server: RoostProcess, queue: str) -> list[str]:
    return sorted(queue_json(server, queue)["members"])  # type: ignore[arg-type]


def publish(server: RoostProcess, queue: str, bodies: list[bytes]) -> None:
    """Each body confirmed (a nack during a leader change is republished)."""
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for raw in bodies:
            for _ in range(100):
                try:
                    ch.basic_publish("", queue, raw, pika.BasicProperties(delivery_mode=2))
                    break
                except pika.exceptions.NackError:
                    conn.sleep(0.1)
            else:
                raise AssertionError(f"{raw!r} never confirmed")


LOCAL = {"X-Roost-Node-Local": "1"}  # the asked node's own view (no asking the leader)


def own_leader(server: RoostProcess, queue: str) -> object:
    shown = httpx.get(
        f"{server.http_url}/api/queues/%2F/{queue}", auth=("guest", "guest"), headers=LOCAL
    )
    return shown.json()["leader"]


def ui_replicas(server: RoostProcess, queue: str) -> None:
    """The web UI's queue page: leader, every member, which are in sync (n3 is not)."""
    from playwright.sync_api import expect

    with browser_page() as page:
        page.goto(server.http_url + "/")
        login = page.get_by_test_id("login")
        login.locator("input[name=username]").fill("guest")
        login.locator("input[name=password]").fill("guest")
        login.get_by_role("button", name="Sign in").click()
        expect(page.locator("#whoami")).to_contain_text("guest")
        page.goto(f"{server.http_url}/#/queues/%2F/{queue}")
        expect(page.get_by_test_id("queue-leader")).to_contain_text(
            "Leader n1: 2 of 3 members online"
        )
        rows = page.get_by_test_id("queue-replicas-table").locator("tbody tr")
        expect(rows).to_have_count(3)
        texts = sorted(" ".join(r.inner_text().split()) for r in rows.all())
        assert texts == ["n1 leader yes", "n2 follower yes", "n3 follower no"], texts


def checked(h: History) -> None:
    again = set(h.redelivered_after_ack)
    flags = {m: [r for _q, d, r in h.deliveries if d == m][1:] for m in again}
    assert [m for m, f in flags.items() if not all(f)] == [], "acked, delivered again unflagged"
    assert [p for p in h.problems() if not p.startswith("delivered again after its ack")] == []
