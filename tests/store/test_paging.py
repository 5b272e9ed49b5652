"""Transient messages paged to disk under memory pressure (issue 3): past the paging
threshold (``--vm-memory-high-watermark-paging-ratio`` x the memory watermark) a queue
writes the transient messages it holds behind its first 1024 to disk, gives them back
intact and in order, and a restart never brings them back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from tests.support import RoostProcess, drain, running

BACKLOG = 3000  # well past the 1024 entries a queue keeps in memory


@pytest.fixture
def paging(tmp_path: Path) -> Iterator[RoostProcess]:
    """Ratio 0: the broker is always 'under pressure', so every queue pages."""
    yield from running(
        RoostProcess(tmp_path / "data", "--vm-memory-high-watermark-paging-ratio", "0")
    )


def _paged_files(server: RoostProcess) -> list[Path]:
    return list((server.data_dir / "paged").rglob("*.seg"))


def _publish(server: RoostProcess, queue: str, durable: bool, mode: int = 1) -> None:
    with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
        ch = conn.channel()
        ch.queue_declare(queue, durable=durable)
        ch.confirm_delivery()
        for i in range(BACKLOG):
            props = pika.BasicProperties(delivery_mode=mode, headers={"i": i})
            ch.basic_publish("", queue, b"message %d" % i, props)


def test_transient_backlog_goes_to_disk_and_comes_back_in_order(
    paging: RoostProcess, qname: str
) -> None:
    _publish(paging, qname, durable=False)
    assert _paged_files(paging), "no transient message was paged out"
    got = drain(paging, qname, ack=True)
    assert [body for _, _, body in got] == [b"message %d" % i for i in range(BACKLOG)]
    assert [props.headers["i"] for _, props, _ in got] == list(range(BACKLOG))
    assert all(props.delivery_mode == 1 for _, props, _ in got)


def test_paged_transient_messages_do_not_survive_a_restart(
    paging: RoostProcess, qname: str
) -> None:
    """A durable queue pages them into its own store, flagged: recovery skips them."""
    _publish(paging, qname, durable=True, mode=1)
    with pika.BlockingConnection(pika.URLParameters(paging.url)) as conn:
        conn.channel().basic_publish("", qname, b"kept", pika.BasicProperties(delivery_mode=2))
    stored = sum(f.stat().st_size for f in (paging.data_dir / "vhosts").rglob("*.seg"))
    assert stored > BACKLOG * 20, "the transient backlog was not written to the queue's store"
    assert paging.stop() == 0
    paging.start()
    assert [body for _, _, body in drain(paging, qname, ack=True)] == [b"kept"]


def test_no_paging_below_the_threshold(fresh_roost: RoostProcess, qname: str) -> None:
    _publish(fresh_roost, qname, durable=False)
    assert not _paged_files(fresh_roost)
    assert len(drain(fresh_roost, qname, ack=True)) == BACKLOG


def _rss(server: RoostProcess) -> int:
    assert server.proc is not None
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    return next(
        int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")
    )


@pytest.fixture
def pressure(tmp_path: Path) -> Iterator[RoostProcess]:
    """Paging from 100 MiB of RSS (half a 200 MiB watermark), measured every 0.2 s."""
    yield from running(
        RoostProcess(
            tmp_path / "data",
            "--vm-memory-high-watermark",
            "200MiB",
            "--alarm-check-interval",
            "0.2",
        )
    )


@pytest.mark.timeout(300)
def test_paging_starts_when_rss_crosses_the_threshold(pressure: RoostProcess, qname: str) -> None:
    """Pressure is off at first: transient messages stay in memory and RSS grows with
    them. Once RSS passes the threshold the broker says so, queues write transient
    messages under DATA/paged, and RSS stops growing with the backlog; every message
    comes back intact and in order."""
    threshold = 100 * 2**20
    body = b"x" * 1024
    conn = pika.BlockingConnection(pika.URLParameters(pressure.url))
    ch = conn.channel()
    ch.queue_declare(qname, durable=False)
    idle = _rss(pressure)
    assert idle < threshold * 0.8, f"idle RSS {idle / 2**20:.0f} MiB leaves no room to test"

    def publish(start: int, count: int) -> None:
        for i in range(start, start + count):
            ch.basic_publish("", qname, b"%08d" % i + body, pika.BasicProperties(delivery_mode=1))
        ch.queue_declare(qname, passive=True)  # a round trip: all of them were queued

    sent, step = 0, 5000
    while "paging transient messages to disk started" not in pressure.log:
        assert not _paged_files(pressure), "paging before the threshold was crossed"
        assert sent < 400_000, f"no paging after {sent} messages, RSS {_rss(pressure)}"
        publish(sent, step)
        sent += step
        conn.sleep(0.3)  # the next memory check
    in_memory = sent
    at_start = _rss(pressure)
    grown_per_message = (at_start - idle) / in_memory
    assert grown_per_message > 1024, "messages in memory should cost at least their body"
    publish(sent, 60_000)  # 60 MiB of bodies more, while paging
    sent += 60_000
    assert _paged_files(pressure), "paging started but nothing was written to DATA/paged"
    growth = _rss(pressure) - at_start
    # in memory these would have taken 60,000 x grown_per_message more (measured: about
    # a sixth of that while paging: the packed places, buffers, allocator slack)
    assert growth < 60_000 * grown_per_message / 3, (
        f"RSS grew {growth / 2**20:.0f} MiB while paging 60,000 messages "
        f"({grown_per_message:.0f} B each before paging)"
    )
    got = 0
    while True:
        method, _props, got_body = ch.basic_get(qname, auto_ack=True)
        if method is None:
            break
        assert got_body == b"%08d" % got + body
        got += 1
    assert got == sent
    conn.close()
