"""The web UI in headless Chromium (Debian's package, never a downloaded browser): sign
in, declare a queue, watch rate and depth move while a publisher runs, publish, purge and
get a message from the queue page. Screenshots go to a temporary directory, or to
docs/screenshots/ when ROOST_UPDATE_SCREENSHOTS=1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from tests.support import RoostProcess, browser_page


@pytest.fixture
def page(mgmt: RoostProcess) -> Iterator[object]:
    with browser_page(viewport={"width": 1280, "height": 860}) as pg:
        yield pg


class Publisher(threading.Thread):
    """Publishes to a queue at a steady pace until stopped (at most ``limit`` messages)."""

    def __init__(self, server: RoostProcess, queue: str, limit: int = 3000) -> None:
        super().__init__(daemon=True)
        self.server, self.queue, self.limit = server, queue, limit
        self.stop = threading.Event()

    def run(self) -> None:
        conn = pika.BlockingConnection(pika.URLParameters(self.server.url))
        ch = conn.channel()
        sent = 0
        while not self.stop.wait(0.02) and sent < self.limit:
            ch.basic_publish("", self.queue, b"background message")
            sent += 1
        conn.close()


def number(text: str) -> float:
    """A figure as the UI prints it ("1,234"; a dash before the first refresh)."""
    cleaned = text.replace(",", "").strip()
    return float(cleaned) if cleaned.replace(".", "", 1).isdigit() else 0.0


def above(testid: str, value: float) -> str:
    """A page predicate: the figure shown in ``testid`` is greater than ``value``."""
    el = f"document.querySelector('[data-testid={testid}]')"
    return f"() => parseFloat({el}.textContent.replace(/,/g, '')) > {value}"


def test_sign_in_declare_watch_publish_get(
    page, mgmt: RoostProcess, shots: Path, name: str
) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page.goto(mgmt.http_url + "/")
    login = page.get_by_test_id("login")
    login.locator("input[name=username]").fill("guest")
    login.locator("input[name=password]").fill("wrong")
    login.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("login-error")).to_contain_text("Wrong username or password")
    page.screenshot(path=str(shots / "login.png"))
    login = page.get_by_test_id("login")
    login.locator("input[name=username]").fill("guest")
    login.locator("input[name=password]").fill("guest")
    login.get_by_role("button", name="Sign in").click()
    expect(page.locator("#whoami")).to_contain_text("guest")
    page.get_by_test_id("refresh").select_option("1")

    page.goto(mgmt.http_url + "/#/queues")
    form = page.get_by_test_id("declare-queue")
    form.locator("input[name=name]").fill(name)
    form.get_by_role("button", name="Add queue").click()
    expect(page.get_by_test_id("flash")).to_contain_text(f"Queue {name} declared")
    expect(page.get_by_test_id("queues-table")).to_contain_text(name)

    publisher = Publisher(mgmt, name)
    publisher.start()
    try:
        page.goto(f"{mgmt.http_url}/#/queues/%2F/{name}")
        rate = page.get_by_test_id("queue-rate-publish")
        ready = page.get_by_test_id("queue-ready")
        page.wait_for_function(above("queue-rate-publish", 0))
        first = number(ready.inner_text())
        page.wait_for_function(above("queue-ready", first))
        assert number(rate.inner_text()) > 0
        page.screenshot(path=str(shots / "queue.png"), full_page=True)
        page.goto(mgmt.http_url + "/#/")
        page.wait_for_function(above("rate-publish", 0))
        page.screenshot(path=str(shots / "overview.png"))
    finally:
        publisher.stop.set()
        publisher.join(10)

    page.goto(f"{mgmt.http_url}/#/queues/%2F/{name}")
    page.get_by_test_id("queue-purge").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Queue purged")
    expect(page.get_by_test_id("queue-ready")).to_have_text("0")
    pub = page.get_by_test_id("queue-publish")
    pub.locator("textarea[name=payload]").fill("hello from the browser")
    pub.get_by_role("button", name="Publish message").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Message published")
    expect(page.get_by_test_id("queue-ready")).to_have_text("1")
    page.get_by_test_id("queue-get").get_by_role("button", name="Get messages").click()
    expect(page.get_by_test_id("payload")).to_have_text("hello from the browser")
    expect(page.get_by_test_id("queue-ready")).to_have_text("1")  # peek requeues

    page.goto(f"{mgmt.http_url}/#/exchanges/%2F/amq.default")
    expect(page.get_by_test_id("exchange-info")).to_contain_text("type direct")
    pub = page.get_by_test_id("exchange-publish")
    pub.locator("input[name=routing_key]").fill(name)
    pub.locator("textarea[name=payload]").fill("via the exchange page")
    pub.get_by_role("button", name="Publish message").click()
    expect(page.get_by_test_id("flash")).to_have_text("Message published")

    page.goto(mgmt.http_url + "/#/queues")
    page.get_by_test_id("queues-filter").fill(name)
    expect(page.get_by_test_id("queues-table").locator("tbody tr")).to_have_count(1)
    ready_cell = page.get_by_test_id("queues-table").locator("td[data-col=messages_ready]")
    expect(ready_cell).to_have_text("2")
    page.screenshot(path=str(shots / "queues.png"))
    page.goto(mgmt.http_url + "/#/admin")
    expect(page.get_by_test_id("users-table")).to_contain_text("guest")
    page.screenshot(path=str(shots / "admin.png"))
