"""A real browser STOMP client (@stomp/stompjs in headless Chromium, Debian's package) on
the test page Roost serves itself (--ws-test-page, at /stomp/test/ on the Web-STOMP
listener) shares queues with a Python AMQP worker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest

from tests.support import (
    STOMPJS,
    RoostProcess,
    browser_page,
    prerequisite,
    running,
)


@pytest.fixture(scope="module")
def stompjs() -> Path:
    if not STOMPJS.exists():
        prerequisite("@stomp/stompjs was not fetched from npm")
    return STOMPJS


@pytest.fixture(scope="module")
def page_server(
    tmp_path_factory: pytest.TempPathFactory, stompjs: Path
) -> Iterator[RoostProcess]:
    data = tmp_path_factory.mktemp("roost-data")
    yield from running(RoostProcess(data, "--ws-test-page", str(stompjs)))


@pytest.fixture
def page(page_server: RoostProcess) -> Iterator[Any]:
    with browser_page() as pg:
        yield pg


def test_roost_serves_the_test_page_and_its_client(page_server: RoostProcess) -> None:
    base = f"http://127.0.0.1:{page_server.ws_port}/stomp/test/"
    with httpx.Client(timeout=5) as http:
        index = http.get(base)
        assert index.status_code == 200 and "text/html" in index.headers["content-type"]
        assert '<script src="stomp.umd.min.js">' in index.text
        client = http.get(base + "stomp.umd.min.js")
        assert client.status_code == 200 and client.content == STOMPJS.read_bytes()
        assert http.get(base + "page.js").status_code == 200
        assert http.get(base + "other.js").status_code == 404
        assert http.get(base + "..%2F..%2Fpyproject.toml").status_code == 404
        moved = http.get(base.rstrip("/"), follow_redirects=True)
        assert moved.status_code == 200 and moved.url == base  # redirected to the page


def test_without_the_setting_there_is_no_test_page(roost: RoostProcess) -> None:
    reply = httpx.get(f"http://127.0.0.1:{roost.ws_port}/stomp/test/", timeout=5)
    assert reply.status_code == 404


def test_browser_and_python_worker_share_queues(page: Any, page_server: RoostProcess) -> None:
    inbox, outbox = "browser.in", "browser.out"
    with pika.BlockingConnection(pika.URLParameters(page_server.url)) as amqp:
        ch = amqp.channel()
        ch.queue_declare(inbox, durable=True)
        ch.queue_declare(outbox, durable=True)
        page.goto(
            f"http://127.0.0.1:{page_server.ws_port}/stomp/test/"
            f"?subscribe=/queue/{inbox}&send=/queue/{outbox}"
        )
        page.wait_for_function("window.roostTest && window.roostTest.connected")
        # browser -> Python, typed into the page's form
        page.fill("#body", "hello from the browser")
        page.click("#send")
        deadline = time.monotonic() + 10
        body = None
        while body is None and time.monotonic() < deadline:
            _method, props, body = ch.basic_get(outbox, auto_ack=True)
            if body is None:
                amqp.sleep(0.05)
        assert body == b"hello from the browser"
        assert props.content_type == "text/plain" and props.delivery_mode == 2
        # Python -> browser
        for i in range(3):
            ch.basic_publish(
                "", inbox, f"job {i}".encode(), pika.BasicProperties(content_type="text/x-job")
            )
        page.wait_for_function("window.roostTest.received.length >= 3")
        received = page.evaluate("window.roostTest.received")
        assert [r["body"] for r in received] == ["job 0", "job 1", "job 2"]
        assert received[0]["type"] == "text/x-job"
        assert page.locator("#received li").all_inner_texts() == ["job 0", "job 1", "job 2"]
        assert page.evaluate("window.roostTest.error") is None
        page.evaluate("window.roostTestClient.deactivate()")
        # the browser acked everything: nothing left in the queue
        assert ch.queue_declare(inbox, passive=True).method.message_count == 0


# stomp.js's ack.spec ("Should deliver to other client if nacked from one"), in the page:
# two clients subscribe with ack:client to one queue, the message is nacked twice and acked
# the third time; bodies of other messages are skipped (and left unacked), as in the spec.
# Before it, a message another client left on the queue; after it, one client with two
# subscriptions nacks the newer of two messages. Returns what each step saw.
ACK_SPEC = """
async ([url, queue]) => {
  const client = () => new Promise((resolve) => {
    const c = new StompJs.Client({brokerURL: url, reconnectDelay: 0,
                                  connectHeaders: {login: "guest", passcode: "guest"}});
    c.onConnect = () => resolve(c);
    c.activate();
  });
  const within = (ms, work) => Promise.race([
    new Promise(work), new Promise((res) => setTimeout(() => res("timeout"), ms))]);
  const out = {};
  const left = await client();
  left.publish({destination: queue, body: "left over"});
  await left.deactivate();
  const [c1, c2] = [await client(), await client()];
  const body = "nack me " + Math.random();
  const seen = [];
  out.nacked = await within(5000, (done) => {
    let count = 0;
    for (const c of [c1, c2]) {
      c.subscribe(queue, (m) => {
        seen.push(m.body);
        if (m.body !== body) return;
        if (++count < 3) { m.nack(); return; }
        m.ack();
        done("acked on the third delivery");
      }, {ack: "client"});
    }
    c1.publish({destination: queue, body});
  });
  out.seen = seen;
  await c1.deactivate(); await c2.deactivate();
  const c3 = await client();
  out.twoSubscriptions = await within(5000, (done) => {
    const got = [];
    const onA = (m) => {
      got.push("A:" + m.body + (m.headers.redelivered === "true" ? " again" : ""));
      if (m.headers.redelivered === "true") done(got.slice());
    };
    const onB = (m) => {
      got.push("B:" + m.body + (m.headers.redelivered === "true" ? " again" : ""));
      // client.nack, as the newer spec does; only A's message is left unsettled then
      if (m.headers.redelivered !== "true") c3.nack(m.headers.ack, m.headers.subscription);
    };
    c3.subscribe(queue + "-a", onA, {ack: "client"});
    c3.subscribe(queue + "-b", onB, {ack: "client"});
    c3.publish({destination: queue + "-a", body: "older"});
    setTimeout(() => c3.publish({destination: queue + "-b", body: "newer"}), 200);
  });
  await c3.deactivate();
  return out;
}
"""


def test_stompjs_nack_in_client_mode(page: Any, page_server: RoostProcess) -> None:
    """stomp.js's ack spec in Chromium: the nacked message goes round both clients and is
    acked on its third delivery, a message left on the queue by an earlier client
    included; NACK in client mode is cumulative over the whole connection, as RabbitMQ
    3.10.8's adapter makes it (basic.nack multiple=true on the connection's channel): the
    older unacked message of another subscription comes back too."""
    page.goto(f"http://127.0.0.1:{page_server.ws_port}/stomp/test/")
    page.wait_for_function("window.roostTest && window.roostTest.connected")
    out = page.evaluate(ACK_SPEC, [f"ws://127.0.0.1:{page_server.ws_port}/ws", "/queue/test01"])
    assert out["nacked"] == "acked on the third delivery", out
    assert out["seen"].count("left over") >= 1, out
    got = out["twoSubscriptions"]
    assert got[:2] == ["A:older", "B:newer"] and got[-1] == "A:older again", out
    # what was skipped or left unacked went back when its client left
    with pika.BlockingConnection(pika.URLParameters(page_server.url)) as amqp:
        ch = amqp.channel()
        assert ch.queue_declare("test01", passive=True).method.message_count <= 1
        assert ch.queue_declare("test01-a", passive=True).method.message_count == 1
