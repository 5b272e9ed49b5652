"""A real browser STOMP client (@stomp/stompjs in headless Chromium, Debian's package)
shares queues with a Python AMQP worker over Roost's Web-STOMP endpoint."""

from __future__ import annotations

import functools
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pika
import pytest

from tests.support import RoostProcess

ROOT = Path(__file__).resolve().parents[2]
STOMPJS = ROOT / ".cache" / "stompjs" / "7.5.0" / "stomp.umd.min.js"  # scripts/_stompjs.sh
CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (scripts/test does)"),
    pytest.mark.skipif(not STOMPJS.exists(), reason="@stomp/stompjs not fetched (scripts/test)"),
]

PAGE_SCRIPT = """
([url, inbox, outbox]) => new Promise((resolve, reject) => {
  window.received = [];
  const client = new StompJs.Client({
    brokerURL: url,
    connectHeaders: {login: 'guest', passcode: 'guest'},
    reconnectDelay: 0,
    onStompError: (frame) => reject(new Error(frame.headers.message)),
  });
  client.onConnect = () => {
    client.subscribe('/queue/' + inbox, (msg) => {
      window.received.push({body: msg.body, type: msg.headers['content-type']});
      msg.ack();
    }, {ack: 'client-individual', 'prefetch-count': '10'});
    client.publish({destination: '/queue/' + outbox, body: 'hello from the browser',
                    headers: {'content-type': 'text/plain', 'persistent': 'true'}});
    resolve(true);
  };
  window.stompClient = client;
  client.activate();
})
"""


@pytest.fixture
def page_server(tmp_path: Path) -> Iterator[str]:
    """A static page on a loopback HTTP server (the browser client's origin)."""
    (tmp_path / "index.html").write_text("<!doctype html><title>STOMP test</title><body>")
    handler = functools.partial(QuietHandler, directory=str(tmp_path))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def page(roost: RoostProcess) -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        pg = browser.new_page()
        pg.set_default_timeout(15_000)
        yield pg
        browser.close()


def test_browser_and_python_worker_share_queues(
    page: object, page_server: str, roost: RoostProcess
) -> None:
    inbox, outbox = "browser.in", "browser.out"
    with pika.BlockingConnection(pika.URLParameters(roost.url)) as amqp:
        ch = amqp.channel()
        ch.queue_declare(inbox, durable=True)
        ch.queue_declare(outbox, durable=True)
        pg = page
        # The page must come from a loopback origin: Chromium's local-network-access
        # checks block WebSockets from about:blank (or intercepted pages) to 127.0.0.1.
        pg.goto(f"{page_server}/index.html")  # type: ignore[attr-defined]
        pg.add_script_tag(path=str(STOMPJS))  # type: ignore[attr-defined]
        url = f"ws://127.0.0.1:{roost.ws_port}/ws"
        assert pg.evaluate(PAGE_SCRIPT, [url, inbox, outbox]) is True  # type: ignore[attr-defined]
        # browser -> Python
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
        pg.wait_for_function("window.received.length >= 3")  # type: ignore[attr-defined]
        received = pg.evaluate("window.received")  # type: ignore[attr-defined]
        assert [r["body"] for r in received] == ["job 0", "job 1", "job 2"]
        assert received[0]["type"] == "text/x-job"
        pg.evaluate("window.stompClient.deactivate()")  # type: ignore[attr-defined]
        # the browser acked everything: nothing left in the queue
        assert ch.queue_declare(inbox, passive=True).method.message_count == 0
