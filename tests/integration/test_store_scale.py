"""The store at scale: thousands of durable queues with bounded file descriptors, and a
backlog far larger than the broker's memory."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pika
import pytest

from tests.integration.conftest import pika_params
from tests.support import RoostProcess


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def pid_of(server: RoostProcess) -> int:
    assert server.proc is not None
    return server.proc.pid


def maps(pid: int) -> int:
    """Memory mappings of the process (the kernel caps them: vm.max_map_count)."""
    return len(Path(f"/proc/{pid}/maps").read_text().splitlines())


def settle_fds(pid: int, at_most: int, timeout: float = 15.0) -> int:
    """Open descriptors once the idle ones are closed (waits up to ``timeout``)."""
    deadline = time.monotonic() + timeout
    while (count := open_fds(pid)) > at_most and time.monotonic() < deadline:
        time.sleep(0.2)
    return count


@pytest.mark.timeout(600)
def test_ten_thousand_durable_queues_recover_with_bounded_fds_and_maps(tmp_path: Path) -> None:
    """10,000 durable queues with a message each: open descriptors stay under
    --max-open-files (plus the process's own), memory mappings do not grow with the
    queues (nothing is mmap'ed), and idle files are closed (--idle-file-close-s)."""
    n = 10_000
    data = tmp_path / "data"
    args = ("--max-open-files", "64", "--idle-file-close-s", "1")
    server = RoostProcess(data, *args).start()
    try:
        pid = pid_of(server)
        base_fds, base_maps = open_fds(pid), maps(pid)
        conn = pika.BlockingConnection(pika_params(server))
        ch = conn.channel()
        persistent = pika.BasicProperties(delivery_mode=2)
        for i in range(n):
            ch.queue_declare(f"many.{i}", durable=True)
            ch.basic_publish("", f"many.{i}", b"m%d" % i, persistent)
        assert open_fds(pid) <= base_fds + 64 + 8
        confirm = conn.channel()
        confirm.confirm_delivery()  # confirmed after the fsync that also covers the rest
        confirm.basic_publish("", "many.0", b"last", persistent)
        assert maps(pid) <= base_maps + 40, (base_maps, maps(pid))
        # idle: the store's descriptors are closed within two idle periods
        assert settle_fds(pid, base_fds + 2) <= base_fds + 2
        conn.close()
        server.kill()
        server = RoostProcess(data, *args).start()
        assert f"recovered {n + 1} messages in {n} queues" in server.log
        pid = pid_of(server)
        assert open_fds(pid) <= base_fds + 64 + 8
        conn = pika.BlockingConnection(pika_params(server))
        ch = conn.channel()
        for i in range(0, n, 97):  # a sample: each holds its message
            method, _, body = ch.basic_get(f"many.{i}", auto_ack=True)
            assert method is not None and body == b"m%d" % i
        for i in range(n):  # writes to every queue again: the open files stay capped
            ch.basic_publish("", f"many.{i}", b"again", persistent)
        ch.queue_declare("many.0", passive=True)
        assert open_fds(pid) <= base_fds + 1 + 64 + 8  # +1: this connection
        assert maps(pid) <= base_maps + 40, (base_maps, maps(pid))
        conn.close()
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log


@pytest.mark.timeout(400)
def test_backlog_larger_than_memory_is_paged(tmp_path: Path) -> None:
    count, size = 100_000, 2048  # 200 MB of bodies
    server = RoostProcess(tmp_path / "data").start()
    try:
        pid = pid_of(server)
        conn = pika.BlockingConnection(pika_params(server))
        ch = conn.channel()
        ch.queue_declare("backlog", durable=True)
        persistent = pika.BasicProperties(delivery_mode=2)
        pad = b"x" * (size - 8)
        for i in range(count):
            ch.basic_publish("", "backlog", b"%08d" % i + pad, persistent)
        assert ch.queue_declare("backlog", passive=True).method.message_count == count
        rss = rss_bytes(pid)
        assert rss < count * size / 2, f"RSS {rss / 1e6:.0f} MB for a 200 MB backlog"
        conn.close()
        assert server.stop() == 0
        server = RoostProcess(tmp_path / "data").start()  # recovery keeps bodies on disk too
        recovered_rss = rss_bytes(pid_of(server))
        assert recovered_rss < count * size / 2, f"RSS {recovered_rss / 1e6:.0f} MB after restart"
        conn = pika.BlockingConnection(pika_params(server))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=500)
        stream = ch.consume("backlog", inactivity_timeout=5)
        for expected, (method, _props, body) in enumerate(stream, start=1):
            assert method is not None, f"stalled after {expected - 1}"
            assert body[:8] == b"%08d" % (expected - 1)
            if expected % 250 == 0 or expected == count:
                ch.basic_ack(method.delivery_tag, multiple=True)
            if expected == count:
                break
        ch.cancel()
        print(f"RSS with {count} x {size} B queued: {rss / 1e6:.0f} MB, "
              f"after restart {recovered_rss / 1e6:.0f} MB")
        conn.close()
    finally:
        server.kill()
    assert "Traceback" not in server.log, server.log
