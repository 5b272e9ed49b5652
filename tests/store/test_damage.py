"""Damaged files on a real server (issue 3): the server starts, keeps what is intact,
says what it dropped, and never deletes the evidence or the messages it could not
place. Damaged definitions, a definition that no longer imports, a missing queue
directory, a flipped byte in a record header, a truncated ack log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pika
import pytest

from tests.support import RoostProcess, drain, running_server

PERSISTENT = pika.BasicProperties(delivery_mode=2)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def fill(server: RoostProcess, queues: dict[str, int], vhost: str = "/") -> None:
    """Declare each durable queue and publish that many confirmed persistent messages."""
    params = pika.URLParameters(server.url)
    params.virtual_host = vhost
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        for queue, count in queues.items():
            ch.queue_declare(queue, durable=True)
            for i in range(count):
                ch.basic_publish("", queue, b"%s-%03d" % (queue.encode(), i), PERSISTENT)


def bodies(server: RoostProcess, queue: str) -> list[bytes]:
    return [body for _, _, body in drain(server, queue)]


def segments(data_dir: Path) -> list[Path]:
    return sorted(data_dir.rglob("*.seg"))


def stopped(server: RoostProcess) -> None:
    assert server.stop() == 0, server.log
    assert "Traceback" not in server.log, server.log


def test_damaged_definitions_fall_back_to_the_previous_copy(data_dir: Path) -> None:
    with running_server(data_dir) as server:
        fill(server, {"keep.a": 5, "keep.b": 3})
        server.kill()  # the queues are only in the journal; the snapshot is the first start's
    before = {p.relative_to(data_dir) for p in segments(data_dir)}
    (data_dir / "definitions.json").write_text('{"users": [ truncated')
    with running_server(data_dir) as server:
        log = server.log
        assert "definitions.json is damaged" in log and "moved to definitions.json.damaged-" in log
        assert "using the previous copy definitions.json.bak" in log
        assert len(list(data_dir.glob("definitions.json.damaged-*"))) == 1  # the evidence
        assert {p.relative_to(data_dir) for p in segments(data_dir)} == before
        assert bodies(server, "keep.a") == [b"keep.a-%03d" % i for i in range(5)]
        assert bodies(server, "keep.b") == [b"keep.b-%03d" % i for i in range(3)]
        assert "recovered 8 messages in 2 queues" in log
    assert "Traceback" not in server.log, server.log


def test_damaged_definitions_without_a_copy_keep_the_messages(data_dir: Path) -> None:
    """Nothing left to rebuild the definitions from: the broker starts with the defaults,
    and the queue directories nobody claims are moved to lost+found, named in the log."""
    with running_server(data_dir) as server:
        fill(server, {"orphan.q": 4})
        stopped(server)
    for name in ("definitions.json.bak", "definitions.journal", "definitions.journal.prev"):
        (data_dir / name).unlink(missing_ok=True)
    (data_dir / "definitions.json").write_bytes(b"\x00" * 100)
    seg_bytes = sum(p.stat().st_size for p in segments(data_dir))
    with running_server(data_dir) as server:
        log = server.log
        assert "definitions.json is damaged" in log
        assert "nothing readable left; starting with the defaults" in log
        assert "queue 'orphan.q' in vhost '/'" in log and "moved to" in log
        moved = segments(data_dir / "lost+found")
        assert moved and sum(p.stat().st_size for p in moved) == seg_bytes
        assert not list((data_dir / "vhosts").rglob("*.seg"))
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:  # guest works
            conn.channel().queue_declare("fresh", durable=True)
    assert "Traceback" not in server.log, server.log


def test_a_definition_that_fails_to_import_costs_only_itself(data_dir: Path) -> None:
    with running_server(data_dir) as server:
        fill(server, {"good": 3, "bad": 2})
        stopped(server)
    path = data_dir / "definitions.json"
    text = path.read_text()
    # an argument the broker refuses: the import of this one queue raises midway
    path.write_text(
        text.replace(
            '"name":"bad","durable":true,"auto_delete":false,"arguments":{}',
            '"name":"bad","durable":true,"auto_delete":false,"arguments":{"x-max-length":"lots"}',
        )
    )
    assert path.read_text() != text
    with running_server(data_dir) as server:
        log = server.log
        assert "importing object by object" in log and "queue {" in log
        assert "1 objects could not be recreated" in log
        assert list(data_dir.glob("definitions.json.damaged-*"))  # as read, kept
        assert bodies(server, "good") == [b"good-%03d" % i for i in range(3)]
        assert "queue 'bad' in vhost '/'" in log  # its directory: in lost+found, named
        assert len(segments(data_dir / "lost+found")) == 1
    assert "Traceback" not in server.log, server.log


@pytest.mark.parametrize("how", ["graceful stop", "kill -9"])
def test_missing_queue_directory_is_reported(data_dir: Path, how: str) -> None:
    with running_server(data_dir) as server:
        fill(server, {"vanishing": 7, "staying": 2})
        if how == "kill -9":
            server.kill()
        else:
            stopped(server)
    queue_dirs = {p.parent for p in segments(data_dir)}
    vanishing = next(d for d in queue_dirs if b"vanishing" in (d / "owner.json").read_bytes())
    shutil.rmtree(vanishing)
    with running_server(data_dir) as server:
        expected = (
            "7 at the last definitions snapshot"
            if how == "graceful stop"
            else "how many is unknown: no snapshot since its first message"
        )
        assert (
            "queue 'vanishing' in vhost '/': data directory missing, its messages are lost"
            f" ({expected})"
        ) in server.log
        assert "queue 'staying'" not in server.log
        assert bodies(server, "vanishing") == []
        assert len(bodies(server, "staying")) == 2
    assert "Traceback" not in server.log, server.log


def test_flipped_byte_in_a_length_field_costs_one_record(data_dir: Path) -> None:
    with running_server(data_dir) as server:
        fill(server, {"flip": 9})
        stopped(server)
    (seg,) = segments(data_dir)
    raw = bytearray(seg.read_bytes())
    record = len(raw) // 9  # equal-sized records: the fifth starts at 4 * record
    raw[4 * record + 1] ^= 0x10  # the length's second byte: it now points past the file
    seg.write_bytes(bytes(raw))
    with running_server(data_dir) as server:
        assert f"{seg.name}@{4 * record} bad checksum or header, {record} bytes dropped" in (
            server.log
        )
        assert "torn tail" not in server.log
        assert bodies(server, "flip") == [b"flip-%03d" % i for i in range(9) if i != 4]
    assert "Traceback" not in server.log, server.log


def test_truncated_ack_log_loses_only_the_cut_ack(data_dir: Path) -> None:
    """Acks of 0..5, then the ack log is cut inside its last entry (the ack of 5): 0..4
    stay gone, 5 comes back (at-least-once), redelivered as it was delivered before."""
    with running_server(data_dir) as server:
        fill(server, {"acked": 10})
        with pika.BlockingConnection(pika.URLParameters(server.url)) as conn:
            ch = conn.channel()
            for _ in range(6):
                method, _props, _body = ch.basic_get("acked")
                ch.basic_ack(method.delivery_tag)
        stopped(server)
    (acks,) = data_dir.rglob("acks")
    size = acks.stat().st_size
    assert size == 12 * 12  # a delivered mark and an ack per message, 12 bytes each
    with acks.open("r+b") as fh:
        fh.truncate(size - 5)
    with running_server(data_dir) as server:
        assert "acks torn tail of 7 bytes dropped" in server.log
        got = drain(server, "acked")
        assert [body for _, _, body in got] == [b"acked-%03d" % i for i in range(5, 10)]
        assert [m.redelivered for m, _, _ in got] == [True, False, False, False, False]
    assert "Traceback" not in server.log, server.log
