"""A disk that fills up: writes that fail with ENOSPC lose nothing, hold their confirms,
raise the disk alarm, and are written once space returns; the store stays readable and
recovers after a restart (also after a crash in the middle of a torn write).

The first tests inject ENOSPC at the store's one file-write call (``os.pwrite``, taking
part of a write first as a nearly full disk does); the last runs a real server on a
small tmpfs, and is skipped where mounting one is not permitted (not in CI)."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import httpx
import pytest
from pamqp.commands import Basic

from roost.store import queue_store
from roost.store.hub import DiskStore
from tests.support import RoostProcess, prerequisite, until

PROPS: tuple[Any, ...] = (None,) * 14


class FillingDisk:
    """Stands in for ``os.pwrite``: takes ``room`` more bytes, then fails with ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.real = os.pwrite
        self.refused = 0

    def __call__(self, fd: int, data: Any, offset: int) -> int:
        if self.room <= 0:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = self.real(fd, bytes(data[: self.room]), offset)
        self.room -= n
        return n


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> FillingDisk:
    filling = FillingDisk(room=10_000)
    monkeypatch.setattr(queue_store.os, "pwrite", filling)
    return filling


def recovered(path: Path) -> list[bytes]:
    hub = DiskStore(path)
    store = hub.open_queue("/", "q")
    seqs: list[int] = []
    store.recover(lambda seq, _size, _delivered, _expires: seqs.append(seq))
    bodies = [store.read(seq)[5] for seq in seqs]
    hub.files.close_all()
    return bodies


def test_enospc_holds_confirms_and_raises_the_alarm_until_space_returns(
    tmp_path: Path, disk: FillingDisk
) -> None:
    body = b"x" * 1000
    full: list[bool] = []
    confirms: list[bool] = []

    async def scenario() -> None:
        hub = DiskStore(tmp_path, on_full=full.append, retry_interval=0.02)
        hub.start(asyncio.get_running_loop())
        store = hub.open_queue("/", "q")
        seqs = [store.append("", "q", PROPS, body) for _ in range(30)]  # ~31 KB: 10 fit
        hub.when_durable(confirms.append)
        await until(lambda: full == [True])
        await until(lambda: disk.refused >= 3)  # retried on its timer, refused each time
        assert confirms == []  # held: neither confirmed nor nacked
        assert [store.read(seq)[5] for seq in seqs] == [body] * 30  # still readable
        disk.room = 1 << 30  # space comes back
        await until(lambda: confirms == [True])
        assert full == [True, False]
        assert hub.bytes_on_disk >= 30 * len(body)
        await hub.close()

    asyncio.run(scenario())
    assert recovered(tmp_path) == [body] * 30


def test_a_crash_while_the_disk_is_full_recovers_what_was_written(
    tmp_path: Path, disk: FillingDisk
) -> None:
    """The torn record left by a partial write is cut on recovery; nothing else is lost
    (the unwritten messages were never confirmed)."""
    body = b"y" * 1000
    hub = DiskStore(tmp_path, fsync="never")
    store = hub.open_queue("/", "q")
    for _ in range(30):
        store.append("", "q", PROPS, body)
    confirms: list[bool] = []
    hub.when_durable(confirms.append)
    hub.flush()
    assert hub.full and confirms == []
    hub.files.close_all()  # "crash": no close, nothing more written
    found = recovered(tmp_path)
    assert 0 < len(found) < 30 and found == [body] * len(found)


def test_shutdown_while_full_nacks_what_was_not_written(tmp_path: Path, disk: FillingDisk) -> None:
    confirms: list[bool] = []

    async def scenario() -> None:
        hub = DiskStore(tmp_path)
        hub.start(asyncio.get_running_loop())
        store = hub.open_queue("/", "q")
        for _ in range(30):
            store.append("", "q", PROPS, b"z" * 1000)
        hub.when_durable(confirms.append)
        await until(lambda: hub.full)
        await hub.close()

    asyncio.run(scenario())
    assert confirms == [False]


def test_acks_that_cannot_be_written_are_kept_for_later(tmp_path: Path, disk: FillingDisk) -> None:
    hub = DiskStore(tmp_path, fsync="never")
    store = hub.open_queue("/", "q")
    seqs = [store.append("", "q", PROPS, b"%d" % i) for i in range(10)]
    hub.flush()
    assert not hub.full
    disk.room = 0
    for seq in seqs[:5]:
        store.remove(seq)
    hub.flush()
    assert hub.full
    disk.room = 1 << 20
    hub.flush()  # the retry
    assert not hub.full
    hub.files.close_all()
    assert recovered(tmp_path) == [b"%d" % i for i in range(5, 10)]


# -- a real full disk ------------------------------------------------------------------


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs, if this machine lets us mount one (root; CI runs as root, and under
    scripts/test a missing mount fails the test instead of skipping it)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        prerequisite("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        prerequisite(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def health(server: RoostProcess) -> httpx.Response:
    return httpx.get(
        f"{server.http_url}/api/health/checks/alarms", auth=("guest", "guest"), timeout=10
    )


def test_a_full_tmpfs_blocks_publishers_and_recovers(tiny_disk: Path) -> None:
    data = tiny_disk / "data"
    filler = tiny_disk / "filler"
    args = ("--disk-free-limit", "0", "--alarm-check-interval", "0.05", "--log-level", "info")
    server = RoostProcess(data, *args).start()
    body = b"m" * 16_384
    count = 40  # 640 KiB: more than the room left below

    async def publish_all() -> None:
        conn = await aio_pika.connect(server.url)
        channel = await conn.channel(publisher_confirms=True)
        queue = await channel.declare_queue("full", durable=True)
        # leave about 200 KiB free: the store runs out of space half way
        free = shutil.disk_usage(tiny_disk).free
        with filler.open("wb") as fh:
            fh.write(b"\0" * (free - 200 * 1024))
        pending = [
            asyncio.ensure_future(
                channel.default_exchange.publish(
                    aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key="full",
                )
            )
            for _ in range(count)
        ]
        await asyncio.to_thread(server.wait_for_log, "out of disk space")
        reply = await asyncio.to_thread(health, server)
        assert reply.status_code == 503
        assert reply.json()["alarms"][0]["resource"] == "disk space"
        await asyncio.sleep(0.2)
        assert not all(p.done() for p in pending)  # their confirms are held, not nacked
        filler.unlink()  # space comes back
        results = await asyncio.wait_for(asyncio.gather(*pending), 20)
        assert all(isinstance(r, Basic.Ack) for r in results)  # a nack would raise
        assert (await queue.declare()).message_count == count
        await conn.close()

    try:
        asyncio.run(publish_all())
        server.wait_for_log("writing again after running out of disk space")
        assert health(server).status_code == 200
        assert server.stop() == 0, server.log
        assert "Traceback" not in server.log, server.log
        again = RoostProcess(data, *args).start()

        async def count_after_restart() -> int:
            conn = await aio_pika.connect(again.url)
            channel = await conn.channel()
            queue = await channel.declare_queue("full", durable=True, passive=True)
            n = int(queue.declaration_result.message_count or 0)
            await conn.close()
            return n

        try:
            assert asyncio.run(count_after_restart()) == count
        finally:
            again.stop()
    finally:
        server.kill()


def test_a_full_tmpfs_nacks_stream_publishes_and_keeps_the_log_whole(tiny_disk: Path) -> None:
    """A stream appends straight to its log: on a full disk the append is refused whole,
    the publisher gets a nack (not a closed connection), the disk alarm is raised, and
    once space returns the log goes on after its last whole record."""
    data = tiny_disk / "data"
    filler = tiny_disk / "filler"
    args = ("--disk-free-limit", "0", "--alarm-check-interval", "0.05", "--log-level", "info")
    server = RoostProcess(data, *args).start()
    stream_args = {"x-queue-type": "stream"}

    async def publish(channel: aio_pika.abc.AbstractChannel, n: int) -> tuple[int, int]:
        results = await asyncio.gather(
            *(
                channel.default_exchange.publish(
                    aio_pika.Message(b"s" * 16_384, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key="events",
                )
                for _ in range(n)
            ),
            return_exceptions=True,
        )
        nacked = [r for r in results if isinstance(r, aio_pika.exceptions.DeliveryError)]
        assert len(nacked) + sum(isinstance(r, Basic.Ack) for r in results) == n, results
        return n - len(nacked), len(nacked)

    async def fill_then_free() -> int:
        conn = await aio_pika.connect(server.url)
        channel = await conn.channel(publisher_confirms=True)
        await channel.declare_queue("events", durable=True, arguments=stream_args)
        free = shutil.disk_usage(tiny_disk).free
        with filler.open("wb") as fh:
            fh.write(b"\0" * (free - 200 * 1024))
        acked, nacked = await publish(channel, 40)  # 640 KiB into about 200 KiB
        assert acked > 0 and nacked > 0
        assert not channel.is_closed and not conn.is_closed
        filler.unlink()
        more, refused = await publish(channel, 5)
        assert (more, refused) == (5, 0)
        await conn.close()
        return acked + more

    try:
        stored = asyncio.run(fill_then_free())
        server.wait_for_log("out of disk space")
        server.wait_for_log("could not store the message")
        assert server.stop() == 0, server.log
        assert "Traceback" not in server.log, server.log
        again = RoostProcess(data, *args).start()
        try:
            assert "dropped" not in again.log  # no torn tail to cut
            assert read_offsets(again, stored) == list(range(stored))
        finally:
            again.stop()
    finally:
        server.kill()


def read_offsets(server: RoostProcess, count: int) -> list[int]:
    async def read() -> list[int]:
        conn = await aio_pika.connect(server.url)
        channel = await conn.channel()
        await channel.set_qos(prefetch_count=100)
        queue = await channel.declare_queue(
            "events", durable=True, passive=True, arguments={"x-queue-type": "stream"}
        )
        seen: list[int] = []
        async with queue.iterator(arguments={"x-stream-offset": "first"}) as messages:
            async for message in messages:
                assert message.body == b"s" * 16_384
                seen.append(int(message.headers["x-stream-offset"]))  # type: ignore[arg-type]
                await message.ack()
                if len(seen) == count:
                    break
        await conn.close()
        return seen

    return asyncio.run(asyncio.wait_for(read(), 30))
