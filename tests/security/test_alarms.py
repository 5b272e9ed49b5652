"""Resource alarms against a real server: a memory or disk alarm blocks connections that
publish (pika sees connection.blocked, then connection.unblocked), consumers keep
draining, and the alarm shows in the health check, /api/nodes and /metrics."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pika
import pytest
import stomp

from roost.core.alarms import disk_limit, memory_limit, parse_size
from tests.support import RoostProcess, eventually, pump

FAST = ("--alarm-check-interval", "0.05")


@pytest.fixture
def roost(tmp_path: Path) -> Iterator[RoostProcess]:
    server = RoostProcess(tmp_path / "data", *FAST).start()
    yield server
    assert server.stop() == 0, server.log
    assert "Traceback" not in server.log, server.log


def api(server: RoostProcess) -> httpx.Client:
    return httpx.Client(base_url=server.http_url, auth=("guest", "guest"), timeout=10.0)


def node_name(server: RoostProcess) -> str:
    with api(server) as http:
        return str(http.get("/api/nodes").json()[0]["name"])


def set_limit(server: RoostProcess, which: str, limit: str) -> None:
    with api(server) as http:
        reply = http.put(f"/api/nodes/{node_name(server)}/{which}", json={"limit": limit})
        assert reply.status_code == 204, reply.text


def queue_depth(server: RoostProcess, queue: str) -> int:
    with api(server) as http:
        return int(http.get(f"/api/queues/%2F/{queue}").json()["messages"])


class Watched:
    """A pika connection that records connection.blocked / unblocked."""

    def __init__(self, server: RoostProcess, **params: Any) -> None:
        p = pika.URLParameters(server.url)
        for key, value in params.items():
            setattr(p, key, value)
        self.conn = pika.BlockingConnection(p)
        self.events: list[str] = []
        self.conn.add_on_connection_blocked_callback(
            lambda _c, frame: self.events.append("blocked: " + frame.method.reason)
        )
        self.conn.add_on_connection_unblocked_callback(
            lambda _c, _frame: self.events.append("unblocked")
        )

    def close(self) -> None:
        if self.conn.is_open:
            self.conn.close()


def test_memory_alarm_blocks_publishers_not_consumers(roost: RoostProcess) -> None:
    publisher, consumer = Watched(roost), Watched(roost)
    pch = publisher.conn.channel()
    pch.queue_declare("work")
    got: list[bytes] = []
    cch = consumer.conn.channel()

    def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
        got.append(body)
        ch.basic_ack(method.delivery_tag)

    cch.basic_consume("work", on_message)
    set_limit(roost, "vm-memory-high-watermark", "1MiB")  # far below any Python's RSS

    # the publish that meets the alarm is taken, then the socket is no longer read
    pch.basic_publish("", "work", b"first")
    assert pump(publisher.conn, lambda: publisher.events == ["blocked: low on memory"])
    pch.basic_publish("", "work", b"second")  # waits in the socket
    # the consumer-only connection is never blocked and keeps draining
    assert pump(consumer.conn, lambda: got == [b"first"])
    time.sleep(0.3)  # a blocked socket: nothing may arrive, there is no event to await
    consumer.conn.process_data_events(time_limit=0.1)
    assert got == [b"first"] and consumer.events == []
    with api(roost) as http:
        states = {c["state"] for c in http.get("/api/connections").json()}
    assert states == {"blocked", "blocking"}

    set_limit(roost, "vm-memory-high-watermark", "0.99")
    assert pump(publisher.conn, lambda: publisher.events[-1:] == ["unblocked"])
    assert pump(consumer.conn, lambda: got == [b"first", b"second"])
    assert consumer.events == []
    publisher.close()
    consumer.close()


def test_alarm_shows_in_health_nodes_and_metrics(roost: RoostProcess) -> None:
    with api(roost) as http:
        assert http.get("/api/health/checks/alarms").json() == {"status": "ok"}
        node = http.get("/api/nodes").json()[0]
        assert node["mem_alarm"] is False and node["disk_free_alarm"] is False
        assert node["mem_limit"] > 0 and node["disk_free_limit"] == 50_000_000
        set_limit(roost, "vm-memory-high-watermark", "1MiB")
        set_limit(roost, "disk-free-limit", "1000TB")
        reply = http.get("/api/health/checks/alarms")
        assert reply.status_code == 503
        assert reply.json() == {
            "status": "failed",
            "reason": "There are alarms in effect in the cluster",
            "alarms": [
                {"node": node["name"], "resource": "disk space"},
                {"node": node["name"], "resource": "memory"},
            ],
        }
        assert http.get("/api/health/checks/local-alarms").status_code == 503
        node = http.get("/api/nodes").json()[0]
        assert node["mem_alarm"] is True and node["disk_free_alarm"] is True
        assert node["mem_limit"] == 1024 * 1024
        assert node["disk_free_limit"] == 1000 * 1000**4
        assert node["mem_used"] > node["mem_limit"]
        assert 0 < node["disk_free"] < node["disk_free_limit"]
        metrics = http.get("/metrics").text
        assert "rabbitmq_alarms_memory_used_watermark 1\n" in metrics
        assert "rabbitmq_alarms_free_disk_space_watermark 1\n" in metrics
        assert "rabbitmq_resident_memory_limit_bytes 1048576\n" in metrics
        assert "rabbitmq_disk_space_available_limit_bytes 1000000000000000\n" in metrics
        assert (
            http.put(
                f"/api/nodes/{node['name']}/disk-free-limit", json={"limit": "lots"}
            ).status_code
            == 400
        )

        set_limit(roost, "vm-memory-high-watermark", "0.99")
        set_limit(roost, "disk-free-limit", "1MB")
        assert http.get("/api/health/checks/alarms").json() == {"status": "ok"}
        metrics = http.get("/metrics").text
        assert "rabbitmq_alarms_memory_used_watermark 0\n" in metrics
        assert "rabbitmq_alarms_free_disk_space_watermark 0\n" in metrics


def test_disk_alarm_from_the_command_line_and_cleared_with_ctl(tmp_path: Path) -> None:
    server = RoostProcess(tmp_path / "data", "--disk-free-limit", "1000TB", *FAST).start()
    try:
        publisher = Watched(server)
        ch = publisher.conn.channel()
        ch.queue_declare("q")
        ch.basic_publish("", "q", b"one")
        assert pump(publisher.conn, lambda: publisher.events == ["blocked: low on disk"])
        ch.basic_publish("", "q", b"two")
        time.sleep(0.2)  # nothing to await: the broker must not read it
        assert queue_depth(server, "q") == 1
        ctl = subprocess.run(
            [
                sys.executable,
                "-m",
                "roost",
                "ctl",
                "--url",
                server.http_url,
                "set-disk-free-limit",
                "1MB",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert ctl.returncode == 0, ctl.stderr
        assert pump(publisher.conn, lambda: publisher.events[-1:] == ["unblocked"])
        ch.queue_declare("q", passive=True)  # a round trip: "two" was read before it
        assert queue_depth(server, "q") == 2
        publisher.close()
        server.wait_for_log("disk resource limit alarm cleared")
    finally:
        assert server.stop() == 0, server.log


def test_pika_gives_up_on_a_connection_blocked_too_long(roost: RoostProcess) -> None:
    """pika's blocked_connection_timeout closes the connection; the broker carries on."""
    publisher = Watched(roost, blocked_connection_timeout=0.5)
    ch = publisher.conn.channel()
    ch.queue_declare("q")
    set_limit(roost, "vm-memory-high-watermark", "1MiB")
    ch.basic_publish("", "q", b"x")
    with pytest.raises(pika.exceptions.ConnectionBlockedTimeout):
        pump(publisher.conn, lambda: False, timeout=5.0)
    assert publisher.events == ["blocked: low on memory"]
    set_limit(roost, "vm-memory-high-watermark", "0.99")
    other = Watched(roost)
    assert other.conn.channel().queue_declare("q", passive=True).method.message_count == 1
    other.close()


class StompListener(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.receipts: list[str] = []
        self.messages: list[str] = []

    def on_receipt(self, frame: Any) -> None:
        self.receipts.append(frame.headers["receipt-id"])

    def on_message(self, frame: Any) -> None:
        self.messages.append(frame.body)


# (the limit that raises the alarm, the limit that clears it)
ALARMS = {
    "memory": ("vm-memory-high-watermark", "1MiB", "0.99"),
    "disk": ("disk-free-limit", "1000TB", "50MB"),
}


@pytest.mark.parametrize(("transport", "alarm"), [
    ("tcp", "memory"), ("websocket", "memory"), ("tcp", "disk"), ("websocket", "disk"),
])
def test_stomp_stops_reading_a_publisher_under_an_alarm(
    roost: RoostProcess, transport: str, alarm: str
) -> None:
    which, raise_at, clear_at = ALARMS[alarm]

    def connect(ws: bool = False) -> tuple[Any, StompListener]:
        conn: Any = (
            stomp.WSConnection([("127.0.0.1", roost.ws_port)], ws_path="/ws", heartbeats=(0, 0))
            if ws
            else stomp.Connection12([("127.0.0.1", roost.stomp_port)], heartbeats=(0, 0))
        )
        listener = StompListener()
        conn.set_listener("", listener)
        conn.connect("guest", "guest", wait=True)
        return conn, listener

    sender, sent = connect(ws=transport == "websocket")
    reader, received = connect()
    reader.subscribe(f"/queue/alarmed-{alarm}", id="1", ack="auto")
    sender.send(f"/queue/alarmed-{alarm}", "before", receipt="r0")
    eventually(lambda: sent.receipts == ["r0"] and received.messages == ["before"])
    set_limit(roost, which, raise_at)
    sender.send(f"/queue/alarmed-{alarm}", "meets the alarm", receipt="r1")
    # the SEND that meets the alarm is taken (and reaches the subscriber) ...
    eventually(lambda: received.messages == ["before", "meets the alarm"])
    eventually(lambda: sent.receipts == ["r0", "r1"])
    # ... the next one is not read
    sender.send(f"/queue/alarmed-{alarm}", "waits", receipt="r2")
    time.sleep(0.3)  # nothing to await: the broker must not read the second SEND
    assert sent.receipts == ["r0", "r1"]
    set_limit(roost, which, clear_at)
    eventually(lambda: sent.receipts == ["r0", "r1", "r2"])
    eventually(lambda: received.messages[-1:] == ["waits"])
    sender.disconnect()
    reader.disconnect()


def test_limits_read_like_rabbitmq() -> None:
    ram = 8 * 1024**3
    assert memory_limit("0.4", ram) == int(0.4 * ram)
    assert memory_limit("relative:0.5", ram) == ram // 2
    assert memory_limit("512MiB", ram) == 512 * 1024**2
    assert memory_limit("absolute:2GB", ram) == 2 * 1000**3
    assert memory_limit("1073741824", ram) == 1024**3
    assert disk_limit("50MB", ram) == 50_000_000
    assert disk_limit("mem_relative:1.5", ram) == int(1.5 * ram)
    assert parse_size("1000TB") == 1000 * 1000**4
    assert parse_size("64k") == 65536
    for bad in ("lots", "12 parsecs", "-1MB"):
        with pytest.raises(ValueError):
            parse_size(bad)
    with pytest.raises(ValueError):
        memory_limit("relative:1.5", ram)


def test_bad_limits_stop_the_server_with_a_clear_message(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "roost",
            "server",
            "--data-dir",
            str(tmp_path),
            "--stream-port",
            "0",
            "--vm-memory-high-watermark",
            "plenty",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0
    assert "vm_memory_high_watermark" in done.stdout + done.stderr


def test_alarm_set_changes_reach_listeners_once() -> None:
    """core/alarms.py alone: measured figures, the store's ENOSPC flag, listeners."""
    from roost.core.alarms import ResourceAlarms

    figures = {"mem": 100, "disk": 10_000}
    alarms = ResourceAlarms(
        memory_watermark="1000",
        disk_free_limit="1000",
        memory_probe=lambda: figures["mem"],
        disk_probe=lambda _path: figures["disk"],
    )
    heard: list[frozenset[str]] = []
    alarms.subscribe(heard.append)
    assert alarms.check() == frozenset()
    figures["mem"] = 5000
    alarms.check()
    alarms.check()  # no change, no call
    alarms.set_store_full(True)  # ENOSPC in the store: disk alarm whatever statvfs says
    figures["mem"] = 10
    alarms.check()
    alarms.set_store_full(False)
    figures["disk"] = 10
    alarms.check()
    alarms.unsubscribe(heard.append)
    alarms.set_disk_free_limit("1")
    assert heard == [
        frozenset({"memory"}),
        frozenset({"memory", "disk"}),
        frozenset({"disk"}),
        frozenset(),
        frozenset({"disk"}),
    ]
    assert alarms.active == frozenset()


def test_a_client_without_the_capability_is_blocked_without_notice(
    roost: RoostProcess,
) -> None:
    """py-amqp told not to announce connection.blocked: no notification, same blocking."""
    import amqp

    class NoBlockedCapability(amqp.Connection):  # type: ignore[misc]
        negotiate_capabilities = {"connection.blocked": False, "consumer_cancel_notify": True}

    heard: list[str] = []
    conn = NoBlockedCapability(
        host=f"127.0.0.1:{roost.amqp_port}",
        on_blocked=lambda reason: heard.append(reason),
        on_unblocked=lambda: heard.append("unblocked"),
    )
    conn.connect()
    try:
        ch = conn.channel()
        ch.queue_declare("quiet")
        set_limit(roost, "vm-memory-high-watermark", "1MiB")
        ch.basic_publish(amqp.Message("one"), routing_key="quiet")
        eventually(lambda: queue_depth(roost, "quiet") == 1)
        ch.basic_publish(amqp.Message("two"), routing_key="quiet")
        time.sleep(0.3)  # nothing to await: "two" must stay unread
        assert queue_depth(roost, "quiet") == 1
        set_limit(roost, "vm-memory-high-watermark", "0.99")
        eventually(lambda: queue_depth(roost, "quiet") == 2)
        with pytest.raises(TimeoutError):
            conn.drain_events(timeout=0.2)  # neither blocked nor unblocked was sent
        assert heard == []
    finally:
        conn.close()


def test_heap_is_trimmed_before_a_memory_alarm_is_judged() -> None:
    """Memory the broker freed but the C library kept (RSS) must not hold the alarm up:
    above the watermark the heap is trimmed and measured again; below it, never."""
    from roost.core.alarms import ResourceAlarms, trim_heap

    rss = {"now": 500}
    trims: list[int] = []

    def trim() -> None:
        trims.append(rss["now"])
        rss["now"] = 400  # what the trim gave back

    alarms = ResourceAlarms(memory_watermark="1000", memory_probe=lambda: rss["now"],
                            disk_probe=lambda _path: 10**12, heap_trim=trim)
    assert alarms.check() == frozenset() and trims == []  # below the limit: no trim
    rss["now"] = 1500
    assert alarms.check() == frozenset() and trims == [1500]  # freed memory, no alarm
    assert alarms.mem_used == 400
    alarms.heap_trim = lambda: None  # really in use: the trim gives nothing back
    rss["now"] = 1500
    assert alarms.check() == frozenset({"memory"})
    assert sys.platform != "linux" or trim_heap is not None  # glibc's malloc_trim found
